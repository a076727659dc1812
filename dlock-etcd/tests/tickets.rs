//! Tickets on etcd: the key taken up moves to a lease of its own, so renewing it keeps
//! no other key of the taker's shared lease alive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use dlock_core::{DistributedLock, LockName, Ticket, random_u64};

/// One client holds two names on its shared lease, writes a ticket for the first and
/// exits without releasing anything (its keep-alives stop). Another takes the ticket
/// up and renews it past the shared lease's TTL: the ticket's name stays held, with
/// the same token, and the other name is free once that TTL is over — its holder is
/// gone, and the ticket must not keep it alive.
#[tokio::test]
async fn a_ticket_keeps_only_its_own_key_alive() {
    let ttl = Duration::from_secs(3);
    let (ticketed, bystander) = (
        LockName::new(&format!("tickets/{:016x}", random_u64())).unwrap(),
        LockName::new(&format!("tickets/{:016x}", random_u64())).unwrap(),
    );
    let ticket = {
        let taker = common::etcd(&common::single()).await;
        let lease = taker
            .try_acquire(&ticketed, ttl)
            .await
            .unwrap()
            .expect("free");
        let other = taker
            .try_acquire(&bystander, ttl)
            .await
            .unwrap()
            .expect("free");
        let ticket = Ticket::of("etcd", &lease).unwrap().to_string();
        std::mem::forget(other); // a process that exits holding it
        ticket.parse::<Ticket>().unwrap()
    };
    let resumer = common::etcd(&common::single()).await;
    let mut lease = resumer
        .resume(&ticket)
        .await
        .expect("the ticket is taken up");
    assert_eq!(lease.token(), ticket.token());
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        lease = resumer
            .renew(&lease)
            .await
            .expect("the ticket's lease renews");
    }
    let held = resumer
        .inspect(&ticketed)
        .await
        .unwrap()
        .expect("still held");
    assert_eq!(held.token, ticket.token());
    assert!(
        resumer.inspect(&bystander).await.unwrap().is_none(),
        "a key of the exited taker outlived its lease: the ticket kept it alive"
    );
    assert!(resumer.release(&lease).await.unwrap());
    assert!(resumer.inspect(&ticketed).await.unwrap().is_none());
}

//! Elections that campaign again (`Election::serve`), built in core on every
//! backend's lock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dlock_core::{Election, FencingToken};
use tokio::sync::mpsc::unbounded_channel;

use super::unique;
use crate::Harness;

/// A serving candidate campaigns again after it resigned (its work returned) and
/// after its leadership was broken from outside (its work is stopped first), each
/// time with a higher epoch; and an election of four serving candidates survives
/// three leader kills in a row: after each crash the next leader is another
/// candidate, with a higher epoch, within the TTL and some slack.
pub async fn requeued_elections_survive_leader_kills(h: &impl Harness) {
    requeues_after_resign_and_loss(h).await;
    survives_three_leader_kills(h).await;
}

async fn requeues_after_resign_and_loss(h: &impl Harness) {
    let name = unique("requeue_after_resign_and_loss");
    let (solo, operator) = (h.client().await, h.client().await);
    let election = Election::new(solo.lock(), name.as_str())
        .expect("election")
        .with_ttl(Duration::from_secs(3))
        .with_requeue_pause(Duration::from_millis(50));
    let (tx, mut epochs) = unbounded_channel::<FencingToken>();
    let mut terms = 0_u32;
    let serving = tokio::spawn(async move {
        election
            .serve("solo", move |epoch| {
                terms += 1;
                let (tx, first) = (tx.clone(), terms == 1);
                async move {
                    let _ = tx.send(epoch);
                    if !first {
                        std::future::pending::<()>().await; // lead until lost
                    }
                }
            })
            .await
    });
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), epochs.recv())
            .await
            .expect("the candidate must lead again")
            .expect("serve stopped")
    };
    let first = next().await;
    let second = next().await;
    assert!(
        second > first,
        "a new leadership after resigning: {first} then {second}"
    );
    let broken = operator
        .break_holder(&name)
        .await
        .expect("break_holder")
        .expect("the candidate leads");
    assert_eq!(broken.token, second);
    let third = next().await;
    assert!(
        third > second,
        "a new leadership after a loss: {second} then {third}"
    );
    serving.abort();
    drop(solo);
}

async fn survives_three_leader_kills(h: &impl Harness) {
    let name = unique("requeue_survives_kills");
    let ttl = h.short_ttl().max(Duration::from_secs(2));
    let led: Arc<Mutex<Vec<(usize, FencingToken)>>> = Arc::default();
    let mut clients = Vec::new();
    let mut serving = Vec::new();
    for i in 0..4 {
        let client = h.client().await;
        let election = Election::new(client.lock(), name.as_str())
            .expect("election")
            .with_ttl(ttl)
            .with_requeue_pause(Duration::from_millis(50));
        let led = Arc::clone(&led);
        serving.push(tokio::spawn(async move {
            election
                .serve(&format!("candidate-{i}"), move |epoch| {
                    led.lock().expect("poisoned").push((i, epoch));
                    std::future::pending::<()>() // lead until killed
                })
                .await
        }));
        clients.push(client);
    }
    let bound = ttl + h.expiry_slack() + Duration::from_secs(15);
    for kill in 0..=3 {
        let deadline = tokio::time::Instant::now() + bound;
        let leader = loop {
            if let Some(&(i, _)) = led.lock().expect("poisoned").get(kill) {
                break i;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no leader {} within {bound:?} of the last kill",
                kill + 1
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if kill < 3 {
            clients[leader].crash();
        }
    }
    let led = led.lock().expect("poisoned").clone();
    assert_eq!(
        led.len(),
        4,
        "one leadership per kill and one after: {led:?}"
    );
    for pair in led.windows(2) {
        assert!(pair[1].1 > pair[0].1, "epochs must increase: {led:?}");
        assert_ne!(
            pair[1].0, pair[0].0,
            "a killed leader cannot lead again: {led:?}"
        );
    }
    for task in serving {
        task.abort();
    }
}

//! `dlock doctor` on etcd: the cluster's version, leader, members and alarms.

use dlock_core::{Finding, LockError};

use crate::EtcdLock;

impl EtcdLock {
    /// The cluster's version, leader, members and alarms. Its lessor times leases on
    /// the server's monotonic clock: no wall clock to check.
    pub(crate) async fn findings(&self) -> Result<Vec<Finding>, LockError> {
        let status = self
            .rpc("status", |mut c| async move { c.status().await })
            .await?;
        let members = self
            .rpc("member list", |mut c| async move { c.member_list().await })
            .await?;
        let mut found = vec![
            Finding::info("server version", format!("etcd {}", status.version())),
            Finding::info(
                "members",
                format!(
                    "{} (database {} MiB)",
                    members.members().len(),
                    status.db_size() / (1024 * 1024)
                ),
            ),
            Finding::info("clock", "leases expire by the servers' monotonic clocks"),
        ];
        if status.leader() == 0 {
            found.push(Finding::critical(
                "leader",
                "none",
                "the cluster has no quorum: nothing can be locked until a majority is back",
            ));
            // alarms go through raft: without a leader there is no asking
            return Ok(found);
        }
        found.push(Finding::info(
            "leader",
            format!("member {:x}", status.leader()),
        ));
        let alarms = self
            .rpc("alarms", |mut c| async move {
                c.alarm(
                    etcd_client::AlarmAction::Get,
                    etcd_client::AlarmType::None,
                    None,
                )
                .await
            })
            .await;
        match alarms {
            Ok(alarms) => {
                for alarm in alarms.alarms() {
                    let corrupt = alarm.alarm() == etcd_client::AlarmType::Corrupt;
                    found.push(Finding::critical(
                        "alarm",
                        format!("{:?} on member {:x}", alarm.alarm(), alarm.member_id()),
                        if corrupt {
                            "a member's data is corrupt: replace the member from a healthy \
                             snapshot; etcd refuses writes until then"
                        } else {
                            "etcd refuses writes while it is out of space: compact, \
                             defragment, then etcdctl alarm disarm"
                        },
                    ));
                }
            }
            Err(e) => found.push(Finding::warning(
                "alarm",
                format!("cannot list alarms: {e}"),
                "check with etcdctl alarm list",
            )),
        }
        Ok(found)
    }
}

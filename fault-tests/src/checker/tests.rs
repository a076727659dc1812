//! The checker's verdicts on hand-made logs.

use super::*;

fn ev(ms: u64, worker: u32, kind: Kind, token: u64, n: u64, accepted: bool) -> Event {
    // validity given in ms after acquisition, as nanoseconds of the same clock
    let n = if kind == Kind::Acquired {
        (ms + n) * 1_000_000
    } else {
        n
    };
    Event {
        at: Duration::from_millis(ms),
        worker,
        kind,
        token,
        n,
        accepted,
        access: 'x',
    }
}

#[test]
fn clean_run_is_safe() {
    let log = vec![
        ev(0, 1, Kind::Acquired, 1, 1000, true),
        ev(1, 1, Kind::Read, 1, 0, true),
        ev(2, 1, Kind::Write, 1, 1, true),
        ev(3, 1, Kind::Released, 1, 0, true),
        ev(4, 2, Kind::Acquired, 2, 1000, true),
        ev(5, 2, Kind::Read, 2, 1, true),
        ev(6, 2, Kind::Write, 2, 2, true),
    ];
    let v = check(&log);
    assert!(v.safe(), "{v:?}");
    assert_eq!((v.ops, v.lost_increments), (2, 0));
}

#[test]
fn finds_overlap_stale_write_and_lost_increment() {
    let log = vec![
        ev(0, 1, Kind::Acquired, 1, 1000, true),
        ev(1, 1, Kind::Read, 1, 0, true),
        ev(500, 2, Kind::Acquired, 2, 1000, true), // inside worker 1's window
        ev(501, 2, Kind::Read, 2, 0, true),
        ev(502, 2, Kind::Write, 2, 1, true),
        ev(2000, 1, Kind::Write, 1, 1, true), // stale, and the increment is lost
    ];
    let v = check(&log);
    assert_eq!(
        (v.overlaps, v.stale_accepted, v.lost_increments),
        (1, 1, 1),
        "{v:?}"
    );
}

#[test]
fn a_killed_holders_window_runs_to_its_validity_and_is_reported_in_pairs() {
    // worker 1 is killed holding (no release): its window ends at valid_until (1000
    // ms); worker 2 got the lock at 1200 ms — after it, so no overlap — but a grant
    // at 900 ms would be inside it
    let after = vec![
        ev(0, 1, Kind::Acquired, 1, 1000, true),
        ev(1200, 2, Kind::Acquired, 2, 1000, true),
        ev(1210, 2, Kind::Released, 2, 0, true),
    ];
    let spans = windows(&after);
    assert!(!spans[0].released && spans[1].released);
    assert_eq!(spans[0].until, Duration::from_millis(1000));
    assert_eq!(spans[1].until, Duration::from_millis(1210));
    assert!(overlapping(&spans, Workload::Election).is_empty());
    let inside = vec![
        ev(0, 1, Kind::Acquired, 1, 1000, true),
        ev(900, 2, Kind::Acquired, 2, 1000, true),
        ev(910, 2, Kind::Released, 2, 0, true),
        ev(950, 3, Kind::Acquired, 3, 1000, true),
    ];
    let pairs = overlapping(&windows(&inside), Workload::Election);
    let tokens: Vec<(u64, u64)> = pairs.iter().map(|(a, b)| (a.token, b.token)).collect();
    // token 2's window was cut at its release (910 ms), before token 3 began
    assert_eq!(tokens, vec![(1, 2), (1, 3)]);
    assert_eq!(check_as(&inside, Workload::Election).overlaps, 2);
}

#[test]
fn an_observer_going_back_in_epoch_is_unsafe() {
    let obs = |ms, w, epoch| ev(ms, w, Kind::Observed, epoch, 0, true);
    // the same leader again (after a vacancy) is not going back
    let forward = vec![
        obs(0, 1, 3),
        obs(1, 2, 3),
        obs(2, 1, 5),
        obs(3, 2, 5),
        obs(4, 2, 5),
    ];
    let v = check_as(&forward, Workload::Election);
    assert_eq!((v.observed, v.observed_backwards), (5, 0));
    assert!(v.safe());
    let back = vec![obs(0, 1, 5), obs(1, 1, 3)];
    let v = check_as(&back, Workload::Election);
    assert_eq!(v.observed_backwards, 1);
    assert!(!v.safe());
}

#[test]
fn the_own_stores_history_must_rise_and_keep_every_accepted_write() {
    let log = vec![
        ev(1, 1, Kind::Write, 3, 1, true),
        ev(2, 2, Kind::Write, 5, 2, true),
        ev(3, 1, Kind::Write, 4, 3, false), // refused: not in the history
    ];
    let counter = |history: &[u64], writes| Counter {
        history: history.to_vec(),
        writes,
    };
    let mut v = Verdict::default();
    check_history(&mut v, &log, &counter(&[3, 5], Some(2)));
    assert!(v.safe() && v.lost_increments == 0, "{v:?}");
    // the store took 4 after 5 and dropped 3
    let mut v = Verdict::default();
    check_history(&mut v, &log, &counter(&[5, 4], None));
    assert_eq!((v.stale_accepted, v.lost_increments), (1, 1), "{v:?}");
    // an unreported write overwritten: only the store's count shows it
    let mut v = Verdict::default();
    check_history(&mut v, &log, &counter(&[3, 5], Some(3)));
    assert_eq!(v.lost_increments, 1, "{v:?}");
    // one holder writing twice is fine; a token coming back later is not
    let mut v = Verdict::default();
    check_history(&mut v, &[], &counter(&[3, 3, 5], None));
    assert!(v.safe(), "{v:?}");
    check_history(&mut v, &[], &counter(&[3, 5, 3], None));
    assert_eq!(v.stale_accepted, 1, "{v:?}");
}

#[test]
fn a_second_effect_or_a_differing_result_is_unsafe() {
    let eff = |ms, w, t, k, a| Event {
        access: a,
        ..ev(ms, w, Kind::Effect, t, k, a != '-')
    };
    let res = |ms, w, t, k, a| Event {
        access: a,
        ..ev(ms, w, Kind::Result, t, k, a != 'S')
    };
    let log = vec![
        eff(1, 1, 7, 1, 'n'),
        res(2, 1, 7, 1, 'R'),
        res(3, 2, 7, 1, 'D'),
        eff(4, 3, 6, 2, '-'),
        res(5, 3, 0, 2, 'S'),
    ];
    let stored = HashMap::from([(1, vec![7])]);
    let v = check_once(&log, &stored);
    assert!(v.safe(), "{v:?}");
    assert_eq!((v.requests, v.ops, v.fence_rejections), (2, 1, 2));
    // two ledger rows for request 1
    let v = check_once(&log, &HashMap::from([(1, vec![7, 9])]));
    assert_eq!(
        (v.duplicate_effects, v.results_disagreeing),
        (1, 0),
        "{v:?}"
    );
    // a caller told of another effect than the one stored
    let mut other = log.clone();
    other.push(res(6, 4, 9, 1, 'D'));
    let v = check_once(&other, &stored);
    assert_eq!(v.results_disagreeing, 1, "{v:?}");
    assert!(!v.safe());
    // Redis: the key holds one effect, a runner reported another
    let mut twice = log.clone();
    twice.push(eff(7, 4, 9, 1, 'n'));
    let v = check_once(&twice, &stored);
    assert_eq!(v.duplicate_effects, 1, "{v:?}");
    // a callers' result that is not the effect stored, alone
    let v = check_once(&log, &HashMap::from([(1, vec![8])]));
    assert_eq!(v.results_disagreeing, 1, "{v:?}");
}

#[test]
fn tokens_backwards_are_caught_for_elections_semaphores_and_around_writers() {
    let grant = |ms, w, t, access| Event {
        access,
        ..ev(ms, w, Kind::Acquired, t, 100, true)
    };
    let rel = |ms, w, t| ev(ms, w, Kind::Released, t, 0, true);
    // a leader after another with a lower token
    let back = vec![grant(0, 1, 5, 'l'), rel(10, 1, 5), grant(20, 2, 4, 'l')];
    assert_eq!(check_as(&back, Workload::Election).tokens_backwards, 1);
    // a reader granted after a writer released, below the writer's token; and a
    // writer below a reader released before it
    let rw = vec![
        grant(0, 1, 7, 'w'),
        rel(10, 1, 7),
        grant(20, 2, 6, 'r'),
        rel(30, 2, 6),
        grant(40, 3, 8, 'r'),
        rel(50, 3, 8),
        grant(60, 1, 8, 'w'),
    ];
    // 6 after writer 7; writer 8 not above reader 8
    assert_eq!(check_as(&rw, Workload::ReadWrite).tokens_backwards, 2);
    // readers among themselves may come in any order
    let readers = vec![grant(0, 1, 9, 'r'), rel(10, 1, 9), grant(20, 2, 3, 'r')];
    assert_eq!(check_as(&readers, Workload::ReadWrite).tokens_backwards, 0);
    // permits: a lower token granted later is a slow holder, a repeated one a defect
    assert_eq!(
        check_as(&readers, Workload::Semaphore(2)).tokens_backwards,
        0
    );
    let twice = vec![grant(0, 1, 9, 'p'), rel(10, 1, 9), grant(20, 2, 9, 'p')];
    assert_eq!(check_as(&twice, Workload::Semaphore(2)).tokens_backwards, 1);
}

#[test]
fn semaphores_count_over_admissions_and_rw_ignores_readers_together() {
    let acq = |ms, w, t, access| Event {
        access,
        ..ev(ms, w, Kind::Acquired, t, 1000, true)
    };
    let three = vec![acq(0, 1, 1, 'p'), acq(1, 2, 2, 'p'), acq(2, 3, 3, 'p')];
    assert_eq!(check_as(&three, Workload::Semaphore(3)).overlaps, 0);
    assert_eq!(check_as(&three, Workload::Semaphore(2)).overlaps, 1);
    let readers = vec![acq(0, 1, 1, 'r'), acq(1, 2, 2, 'r')];
    assert_eq!(check_as(&readers, Workload::ReadWrite).overlaps, 0);
    let mixed = vec![acq(0, 1, 1, 'r'), acq(1, 2, 2, 'w')];
    assert_eq!(check_as(&mixed, Workload::ReadWrite).overlaps, 1);
}

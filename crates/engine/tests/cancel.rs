//! Issue 15, "interruptible": every algorithm checks the cancellation token
//! in its own loops (not only the pipeline between phases), and a cancel in
//! the middle of a long run stops it promptly.

mod common;

use std::time::{Duration, Instant};

use kanon_engine::algorithms::{by_name, Context};
use kanon_engine::cancel::Cancellation;
use kanon_engine::encode::EquivalenceClasses;
use kanon_engine::pipeline::anonymize_cancellable;
use kanon_engine::privacy::Privacy;
use kanon_engine::Error;

/// A fired token given straight to the algorithm (no pipeline check before
/// it): each algorithm must notice it itself and publish nothing.
#[test]
fn every_algorithm_stops_on_a_fired_token() {
    let (mut spec, table) = common::adult_table(&[]);
    let cancel = Cancellation::new();
    cancel.cancel();
    for (algorithm, block_size) in [
        ("mondrian", None),
        ("kaca", None),
        ("sbc", None),
        ("l-clustering", None),
        ("datafly", None),
        ("incognito", None),
        ("heuristic-min", None),
        ("kaca", Some(5000)),
    ] {
        spec.algorithm.name = algorithm.into();
        spec.algorithm.params.clear();
        if let Some(b) = block_size {
            spec.algorithm.params.insert("block_size".into(), b.into());
        }
        if algorithm == "l-clustering" {
            spec.privacy.l = Some(2);
        } else {
            spec.privacy.l = None;
        }
        let privacy = Privacy::from_spec(&spec).unwrap();
        let classes = EquivalenceClasses::of(&table);
        let result = by_name(&spec).unwrap().run(&Context {
            table: &table,
            classes: &classes,
            privacy: &privacy,
            spec: &spec,
            cancel: &cancel,
            progress: kanon_engine::progress::Silent::sink(),
            blocks: kanon_engine::algorithms::partitioned::LocalBlocks::get(),
        });
        assert!(
            matches!(result, Err(Error::Cancelled(_))),
            "{algorithm} (blocks {block_size:?}) ignored the cancellation"
        );
    }
}

/// HeuristicMin on all eight Adult QIs takes seconds; a cancel 200 ms in
/// stops it well within a second or two (debug build), not at the end.
#[test]
fn a_long_run_stops_soon_after_the_cancel() {
    let (mut spec, table) = common::adult_table(&[]);
    spec.algorithm.name = "heuristic-min".into();
    spec.privacy.k = 10;
    let privacy = Privacy::from_spec(&spec).unwrap();
    let cancel = Cancellation::new();
    let remote = cancel.clone();
    let fired = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        remote.cancel();
        Instant::now()
    });
    let result = anonymize_cancellable(
        &spec,
        &table,
        &privacy,
        &cancel,
        kanon_engine::progress::Silent::sink(),
        kanon_engine::algorithms::partitioned::LocalBlocks::get(),
    );
    let done = Instant::now();
    let fired_at = fired.join().unwrap();
    eprintln!("cancelled: {}", matches!(result, Err(Error::Cancelled(_))));
    match result {
        Err(Error::Cancelled(_)) => {
            let late = done.saturating_duration_since(fired_at);
            assert!(
                late < Duration::from_secs(3),
                "stopped {late:?} after the cancel"
            );
        }
        Ok(_) => assert!(
            done < fired_at,
            "finished after the cancel without noticing it"
        ),
        Err(e) => panic!("{e}"),
    }
}

/// A deadline stops the work like a cancel, and says so.
#[test]
fn a_deadline_stops_the_work() {
    let (mut spec, table) = common::adult_table(&[]);
    spec.algorithm.name = "heuristic-min".into();
    spec.privacy.k = 10;
    let privacy = Privacy::from_spec(&spec).unwrap();
    let cancel = Cancellation::new().with_deadline(Instant::now() + Duration::from_millis(100));
    let err = anonymize_cancellable(
        &spec,
        &table,
        &privacy,
        &cancel,
        kanon_engine::progress::Silent::sink(),
        kanon_engine::algorithms::partitioned::LocalBlocks::get(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("time limit"), "{err}");
}

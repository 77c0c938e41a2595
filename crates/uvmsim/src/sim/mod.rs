//! Simulation core: integer-picosecond time, clock domains, the deterministic
//! event queue, seeded hashing for random choices, and the run loop.
//!
//! How it works: a model (see [`Model`]) owns all component state; the run loop
//! pops the earliest event (ties broken by insertion order, so a run is a pure
//! function of config and seed) and hands it to the model, which may schedule
//! more. The loop ends when the model reports it is finished; it fails with a
//! description of what every component waits for when the queue empties while
//! work is outstanding, or when simulated time stops advancing.

mod queue;
mod rng;
mod time;

pub use queue::EventQueue;
pub use rng::mix64;
pub use time::{ns_to_ps, ps_to_ns, Clock, Ps, PS_PER_NS, PS_PER_US};

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

thread_local! {
    /// The flag that interrupts the runs of this thread (set by [`with_cancel`]).
    static CANCEL: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Run `f` on this thread with `flag` as its interrupt: once `flag` is set, a [`run`]
/// in progress stops with [`SimError::Interrupted`] within a few hundred events, and
/// long loops outside it (recording a trace) stop at their next check of [`cancelled`].
/// The Python binding sets the flag when Ctrl-C reaches the interpreter.
pub fn with_cancel<R>(flag: Arc<AtomicBool>, f: impl FnOnce() -> R) -> R {
    let prev = CANCEL.with(|c| c.replace(Some(flag)));
    let r = f();
    CANCEL.with(|c| *c.borrow_mut() = prev);
    r
}

fn cancel_flag() -> Option<Arc<AtomicBool>> {
    CANCEL.with(|c| c.borrow().clone())
}

/// Was this thread's work interrupted (see [`with_cancel`])?
pub fn cancelled() -> bool {
    CANCEL.with(|c| c.borrow().as_ref().is_some_and(|f| f.load(Ordering::Relaxed)))
}

/// A simulated system driven by [`run`].
pub trait Model {
    type Event: Copy;
    /// Handle one event at time `now`; new events go into `queue`.
    fn handle(&mut self, now: Ps, ev: Self::Event, queue: &mut EventQueue<Self::Event>) -> Result<(), SimError>;
    /// True when all the work of the run is done.
    fn finished(&self) -> bool;
    /// One line per component that still has outstanding work, saying what it waits for.
    fn describe_waiting(&self) -> Vec<String>;
    /// What the progress line adds about how far the run is (empty: nothing to add).
    fn progress_note(&self) -> String {
        String::new()
    }
}

/// A failure of the simulation itself (not of the input).
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// The event queue emptied while work was outstanding.
    Deadlock { now: Ps, waiting: Vec<String> },
    /// Events kept firing without simulated time advancing.
    Livelock { now: Ps, events: u64, waiting: Vec<String> },
    /// The model reached a state its inputs should not produce (e.g. an access to unmapped memory).
    Model(String),
    /// Input read during the run is bad (a malformed trace record): the message names file and line.
    BadInput(String),
    /// The run handled its budget of events (`sim.max_events`) before finishing.
    Budget { now: Ps, events: u64 },
    /// The run was interrupted (see [`with_cancel`]): Ctrl-C.
    Interrupted { now: Ps, events: u64 },
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Deadlock { now, waiting } => write!(
                f,
                "deadlock at {:.3} ns: no event is pending but work is outstanding; waiting:\n  {}",
                ps_to_ns(*now),
                waiting.join("\n  ")
            ),
            SimError::Livelock { now, events, waiting } => write!(
                f,
                "simulated time stopped advancing at {:.3} ns ({events} events without progress); waiting:\n  {}",
                ps_to_ns(*now),
                waiting.join("\n  ")
            ),
            SimError::Model(m) | SimError::BadInput(m) => write!(f, "{m}"),
            SimError::Budget { now, events } => write!(
                f,
                "event budget reached: {events} events handled by {:.3} ns simulated without finishing (sim.max_events)",
                ps_to_ns(*now)
            ),
            SimError::Interrupted { now, events } => {
                write!(f, "interrupted after {events} events, at {:.3} ns simulated", ps_to_ns(*now))
            }
        }
    }
}

impl std::error::Error for SimError {}

/// Limits and reporting for [`run`].
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Fail when this many events in a row fire at the same simulated time.
    pub stall_events: u64,
    /// Print progress to stderr every this many wall seconds (0 = never).
    pub progress_every_s: f64,
    /// Fail with [`SimError::Budget`] after this many events (0 = no limit).
    pub max_events: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { stall_events: 10_000_000, progress_every_s: 0.0, max_events: 0 }
    }
}

/// What [`run`] reports about itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunReport {
    pub events: u64,
    pub end_ps: Ps,
    pub wall_s: f64,
}

/// Run `model` from the events already in `queue` until it is finished.
pub fn run<M: Model>(model: &mut M, queue: &mut EventQueue<M::Event>, opts: &RunOptions) -> Result<RunReport, SimError> {
    let start = Instant::now();
    let mut events: u64 = 0;
    let mut last_t: Ps = 0;
    let mut same_t: u64 = 0;
    let mut next_report = opts.progress_every_s;
    // 0 (no limit) becomes u64::MAX: one compare per event either way.
    let budget = if opts.max_events == 0 { u64::MAX } else { opts.max_events };
    let cancel = cancel_flag();
    while let Some((t, ev)) = queue.pop() {
        if events == budget {
            return Err(SimError::Budget { now: t, events });
        }
        events += 1;
        if t == last_t {
            same_t += 1;
            if same_t >= opts.stall_events {
                return Err(SimError::Livelock { now: t, events: same_t, waiting: model.describe_waiting() });
            }
        } else {
            last_t = t;
            same_t = 0;
        }
        model.handle(t, ev, queue)?;
        // Every 256 events: a heavy event (a gather over a 100 GiB table) can take a millisecond.
        if events & 0xFF == 0 && cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(SimError::Interrupted { now: t, events });
        }
        // The clock is read every 4,096 events (a few ns per event at most): every 2^20, as before,
        // a run of heavy events (a 100 GiB footprint: 287 K events in minutes) never reported.
        if opts.progress_every_s > 0.0 && events & 0xFFF == 0 {
            let wall = start.elapsed().as_secs_f64();
            if wall >= next_report {
                eprintln!(
                    "uvmsim: {:>10.1} µs simulated, {:>12} events, {:>6.2} M events/s{}",
                    t as f64 / PS_PER_US as f64,
                    events,
                    events as f64 / wall / 1e6,
                    model.progress_note()
                );
                next_report = wall + opts.progress_every_s;
            }
        }
        if model.finished() {
            return Ok(RunReport { events, end_ps: t, wall_s: start.elapsed().as_secs_f64() });
        }
    }
    if model.finished() {
        return Ok(RunReport { events, end_ps: last_t, wall_s: start.elapsed().as_secs_f64() });
    }
    Err(SimError::Deadlock { now: last_t, waiting: model.describe_waiting() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy model: `n` jobs, each needs `steps` events `gap` apart.
    struct Toy {
        left: Vec<u32>,
        gap: Ps,
        log: Vec<(Ps, u32)>,
    }

    impl Model for Toy {
        type Event = u32;
        fn handle(&mut self, now: Ps, job: u32, q: &mut EventQueue<u32>) -> Result<(), SimError> {
            self.log.push((now, job));
            let l = &mut self.left[job as usize];
            *l -= 1;
            if *l > 0 {
                q.push(now + self.gap, job);
            }
            Ok(())
        }
        fn finished(&self) -> bool {
            self.left.iter().all(|&l| l == 0)
        }
        fn describe_waiting(&self) -> Vec<String> {
            self.left.iter().enumerate().filter(|(_, &l)| l > 0).map(|(i, l)| format!("job {i}: {l} steps left")).collect()
        }
    }

    #[test]
    fn ties_run_in_insertion_order() {
        let mut m = Toy { left: vec![2, 2, 2], gap: 10, log: vec![] };
        let mut q = EventQueue::new();
        for j in [2, 0, 1] {
            q.push(0, j);
        }
        let r = run(&mut m, &mut q, &RunOptions::default()).unwrap();
        assert_eq!(m.log, vec![(0, 2), (0, 0), (0, 1), (10, 2), (10, 0), (10, 1)]);
        assert_eq!(r.events, 6);
        assert_eq!(r.end_ps, 10);
    }

    /// A set interrupt flag stops the run within 256 events; an unset one changes nothing, and
    /// the flag belongs to the thread that set it (a run elsewhere ignores it).
    #[test]
    fn an_interrupt_stops_the_run_of_its_thread() {
        let toy = || (Toy { left: vec![10_000], gap: 10, log: vec![] }, EventQueue::new());
        let go = |m: &mut Toy, q: &mut EventQueue<u32>| {
            q.push(0, 0);
            run(m, q, &RunOptions::default())
        };
        let flag = Arc::new(AtomicBool::new(true));
        let (mut m, mut q) = toy();
        let r = with_cancel(flag.clone(), || go(&mut m, &mut q));
        assert_eq!(r.unwrap_err(), SimError::Interrupted { now: 2550, events: 256 });
        assert!(with_cancel(flag.clone(), cancelled) && !cancelled());
        flag.store(false, Ordering::Relaxed);
        let (mut m, mut q) = toy();
        assert_eq!(with_cancel(flag, || go(&mut m, &mut q)).unwrap().events, 10_000);
        let (mut m, mut q) = toy();
        assert!(go(&mut m, &mut q).is_ok());
    }

    #[test]
    fn empty_queue_with_work_left_is_a_deadlock_naming_the_waiter() {
        let mut m = Toy { left: vec![2, 5], gap: 10, log: vec![] };
        let mut q = EventQueue::new();
        q.push(0, 0); // job 1 never gets an event
        let err = run(&mut m, &mut q, &RunOptions::default()).unwrap_err();
        match &err {
            // Job 0's two steps at 0 and 10 ps: the queue empties at 10 ps, the deadlock's time.
            SimError::Deadlock { now, waiting } => {
                assert_eq!(*now, 10);
                assert_eq!(waiting, &vec!["job 1: 5 steps left".to_string()])
            }
            e => panic!("expected a deadlock, got {e:?}"),
        }
        assert!(err.to_string().contains("job 1: 5 steps left"));
    }

    /// A model with no work and no events is finished, not deadlocked.
    #[test]
    fn a_run_with_nothing_to_do_finishes_at_time_zero() {
        let mut m = Toy { left: vec![], gap: 10, log: vec![] };
        let r = run(&mut m, &mut EventQueue::new(), &RunOptions::default()).unwrap();
        assert_eq!((r.events, r.end_ps), (0, 0));
    }

    /// A nested `with_cancel` hands the thread back its outer flag when it returns.
    #[test]
    fn an_inner_interrupt_flag_gives_way_to_the_outer_one() {
        let (outer, inner) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
        let seen = with_cancel(outer, || {
            let during = with_cancel(inner, cancelled);
            (during, cancelled())
        });
        assert_eq!(seen, (false, true));
    }

    #[test]
    fn the_event_budget_stops_a_run_that_needs_more_and_not_one_that_fits() {
        // One job of 5 steps, 10 ps apart: exactly 5 events.
        let run_with = |max_events| {
            let mut m = Toy { left: vec![5], gap: 10, log: vec![] };
            let mut q = EventQueue::new();
            q.push(0, 0);
            let r = run(&mut m, &mut q, &RunOptions { max_events, ..RunOptions::default() });
            (r, m.log.len())
        };
        for budget in [0, 5, 6] {
            let (r, handled) = run_with(budget);
            assert_eq!((r.unwrap().events, handled), (5, 5), "budget {budget}");
        }
        let (r, handled) = run_with(4);
        let err = r.unwrap_err();
        // Stopped before the fifth event (at 40 ps), having handled four.
        assert!(matches!(err, SimError::Budget { now: 40, events: 4 }), "{err:?}");
        assert_eq!(handled, 4);
        assert!(err.to_string().contains("sim.max_events"));
    }

    #[test]
    fn time_that_stops_advancing_is_reported() {
        let mut m = Toy { left: vec![u32::MAX], gap: 0, log: vec![] };
        let mut q = EventQueue::new();
        q.push(5, 0);
        let opts = RunOptions { stall_events: 1000, ..RunOptions::default() };
        let err = run(&mut m, &mut q, &opts).unwrap_err();
        assert!(matches!(err, SimError::Livelock { now: 5, events: 1000, .. }), "{err:?}");
        assert!(err.to_string().contains("stopped advancing"));
    }
}

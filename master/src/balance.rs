//! The balancer's choice of the next range move: first even range counts, then each table's
//! ranges spread evenly, then even load.
//!
//! Load is what the range servers report per range (cells written and cells scans stepped
//! over, as counters), turned into a smoothed rate by the master ([`LoadMeter`]). A server's
//! load is the sum of its ranges' rates.
//!
//! - **Counts**: when the fullest live server holds two or more ranges more than the emptiest,
//!   coldest range of the table it holds most more of than the emptiest moves there (the
//!   coldest, so that evening counts never undoes a load move; of that table, so that evening
//!   counts never undoes a table's spread).
//! - **Tables**: when counts are even, but a table has two or more ranges more on one server
//!   than on another, the coldest of them moves to the server with the fewest (a table's
//!   ranges are what a scan of it reads in parallel: Bigtable applications such as a
//!   partitioned index want each table over all servers, not only even totals). The counts
//!   rule then moves a range of another table back if needed, which makes the pair a swap.
//!   Each move lowers the tables' spread or, with it unchanged, the counts' spread, so moves
//!   end.
//! - **Load**: when counts are even, the busiest server's load exceeds the idlest's by at least
//!   `min_gap` cells/s and by at least `min_ratio` of the busiest's load, the range of the
//!   busiest whose move shrinks that gap most moves to the idlest, provided the gap shrinks by
//!   at least `min_improvement` of itself (a range hotter than the gap would only move the
//!   problem). The counts rule then moves the idlest server's coldest range back if needed,
//!   which makes the pair a swap. After a load move the master waits `cooldown` before the
//!   next, so the moved range's rate is measured anew on its new server.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::time::Clock;

use crate::HeldRange;

/// Settings of the load rule.
#[derive(Debug, Clone)]
pub struct LoadPolicy {
    /// Off: only counts are evened.
    pub enabled: bool,
    /// Smallest load difference (cells/s) worth a move.
    pub min_gap: f64,
    /// ... also as a fraction of the busiest server's load.
    pub min_ratio: f64,
    /// A move must shrink the gap by at least this fraction of it.
    pub min_improvement: f64,
    /// Time between load moves.
    pub cooldown: Duration,
    /// Time constant of the rate smoothing.
    pub smoothing: Duration,
}

impl Default for LoadPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            min_gap: 1_000.0,
            min_ratio: 0.3,
            min_improvement: 0.25,
            cooldown: Duration::from_secs(30),
            smoothing: Duration::from_secs(5),
        }
    }
}

/// One live server as the balancer sees it: its ranges (METADATA left out) with their rates.
#[derive(Debug, Clone)]
pub struct ServerView {
    pub location: String,
    pub ranges: Vec<(HeldRange, f64)>,
}

impl ServerView {
    fn load(&self) -> f64 {
        self.ranges.iter().map(|(_, r)| r).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Count,
    Table,
    Load,
}

/// A move the balancer wants.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub range: HeldRange,
    pub from: String,
    pub to: String,
    pub reason: Reason,
}

/// The next move, if any; `load_allowed` is false during the cooldown after a load move.
pub fn decide(servers: &[ServerView], policy: &LoadPolicy, load_allowed: bool) -> Option<Decision> {
    if servers.len() < 2 {
        return None;
    }
    // Counts.
    let fullest = servers
        .iter()
        .max_by(|a, b| {
            a.ranges
                .len()
                .cmp(&b.ranges.len())
                .then_with(|| b.location.cmp(&a.location))
        })
        .expect("two or more");
    let emptiest = servers
        .iter()
        .min_by(|a, b| {
            a.ranges
                .len()
                .cmp(&b.ranges.len())
                .then_with(|| a.location.cmp(&b.location))
        })
        .expect("two or more");
    if fullest.ranges.len() >= emptiest.ranges.len() + 2 {
        // The table the fullest holds most more of than the emptiest, its coldest range.
        let surplus = |t: u32| {
            let on = |v: &ServerView| v.ranges.iter().filter(|(r, _)| r.0 == t).count() as i64;
            on(fullest) - on(emptiest)
        };
        let (range, _) = fullest
            .ranges
            .iter()
            .min_by(|a, b| {
                surplus(b.0.0)
                    .cmp(&surplus(a.0.0))
                    .then_with(|| a.1.total_cmp(&b.1))
            })
            .expect("two or more ranges");
        return Some(Decision {
            range: range.clone(),
            from: fullest.location.clone(),
            to: emptiest.location.clone(),
            reason: Reason::Count,
        });
    }
    // Tables.
    let mut tables: Vec<u32> = servers
        .iter()
        .flat_map(|v| v.ranges.iter().map(|(r, _)| r.0))
        .collect();
    tables.sort_unstable();
    tables.dedup();
    for t in tables {
        let on = |v: &ServerView| v.ranges.iter().filter(|(r, _)| r.0 == t).count();
        let most = servers
            .iter()
            .max_by(|a, b| on(a).cmp(&on(b)).then_with(|| b.location.cmp(&a.location)))
            .expect("two or more");
        let fewest = servers
            .iter()
            .min_by(|a, b| on(a).cmp(&on(b)).then_with(|| a.location.cmp(&b.location)))
            .expect("two or more");
        if on(most) >= on(fewest) + 2 {
            let (range, _) = most
                .ranges
                .iter()
                .filter(|(r, _)| r.0 == t)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("ranges of the table");
            return Some(Decision {
                range: range.clone(),
                from: most.location.clone(),
                to: fewest.location.clone(),
                reason: Reason::Table,
            });
        }
    }
    if !policy.enabled || !load_allowed {
        return None;
    }
    // Load.
    let busiest = servers
        .iter()
        .max_by(|a, b| a.load().total_cmp(&b.load()))
        .expect("two or more");
    let idlest = servers
        .iter()
        .min_by(|a, b| a.load().total_cmp(&b.load()))
        .expect("two or more");
    let gap = busiest.load() - idlest.load();
    if busiest.location == idlest.location
        || gap < policy.min_gap
        || gap < policy.min_ratio * busiest.load()
    {
        return None;
    }
    let (range, rate) = busiest
        .ranges
        .iter()
        .filter(|(_, rate)| *rate > 0.0)
        .min_by(|a, b| (gap - 2.0 * a.1).abs().total_cmp(&(gap - 2.0 * b.1).abs()))?;
    if (gap - 2.0 * rate).abs() > (1.0 - policy.min_improvement) * gap {
        return None;
    }
    Some(Decision {
        range: range.clone(),
        from: busiest.location.clone(),
        to: idlest.location.clone(),
        reason: Reason::Load,
    })
}

/// The wait after a load move, on the master's clock: a load move may start once the policy's
/// `cooldown` has passed since the last one started (at once before the first).
#[derive(Debug)]
pub struct LoadCooldown {
    clock: Arc<dyn Clock>,
    last_move: Option<Instant>,
}

impl LoadCooldown {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            last_move: None,
        }
    }

    /// Whether a load move may start now.
    pub fn allows(&self, cooldown: Duration) -> bool {
        self.last_move
            .is_none_or(|t| self.clock.now().saturating_duration_since(t) >= cooldown)
    }

    /// Records that a load move starts now.
    pub fn moved(&mut self) {
        self.last_move = Some(self.clock.now());
    }
}

/// Turns the servers' counters into smoothed rates per range. A counter counts from when its
/// range was loaded on its server, so deltas are taken per (server, range); the rate belongs
/// to the range and survives a move (the new server's first report is only a baseline). Rates
/// not updated for ten smoothing periods (ranges that split, were dropped or sit unassigned)
/// are forgotten.
#[derive(Debug, Default)]
pub struct LoadMeter {
    counters: HashMap<(String, HeldRange), (u64, Instant)>,
    rates: HashMap<HeldRange, (f64, Instant)>,
}

impl LoadMeter {
    /// Records what `location` reported at `now`: each range with its counter (cells written
    /// plus cells read). Ranges it no longer reports lose their counter there.
    pub fn record(
        &mut self,
        location: &str,
        ranges: impl IntoIterator<Item = (HeldRange, u64)>,
        now: Instant,
        smoothing: Duration,
    ) {
        let mut fresh = HashMap::new();
        for (range, counter) in ranges {
            let key = (location.to_string(), range);
            match self.counters.remove(&key) {
                Some((old, at)) if counter >= old && now > at => {
                    let dt = (now - at).as_secs_f64();
                    let instant = (counter - old) as f64 / dt;
                    let alpha = dt / (dt + smoothing.as_secs_f64());
                    let rate = match self.rates.get(&key.1) {
                        Some((r, _)) => r + alpha * (instant - r),
                        None => instant,
                    };
                    self.rates.insert(key.1.clone(), (rate, now));
                    fresh.insert(key, (counter, now));
                }
                Some((old, at)) if counter >= old => {
                    fresh.insert(key, (old, at));
                }
                _ => {
                    fresh.insert(key, (counter, now));
                }
            }
        }
        self.counters.retain(|(l, _), _| l != location);
        self.counters.extend(fresh);
        let horizon = smoothing * 10;
        self.rates
            .retain(|_, (_, at)| now.saturating_duration_since(*at) <= horizon);
    }

    /// Forgets a server's counters (it died).
    pub fn forget(&mut self, location: &str) {
        self.counters.retain(|(l, _), _| l != location);
    }

    /// The smoothed rate of a range (0 until measured).
    pub fn rate(&self, range: &HeldRange) -> f64 {
        self.rates.get(range).map_or(0.0, |(r, _)| *r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::time::ManualClock;
    use proptest::prelude::*;

    fn range(t: u32) -> HeldRange {
        (t, None, None)
    }

    fn server(name: &str, rates: &[(u32, f64)]) -> ServerView {
        ServerView {
            location: name.into(),
            ranges: rates.iter().map(|&(t, r)| (range(t), r)).collect(),
        }
    }

    #[test]
    fn uneven_counts_move_the_coldest_range_first() {
        let v = [
            server("rs1", &[(1, 50.0), (2, 5.0), (3, 900.0)]),
            server("rs2", &[(4, 10.0)]),
            server("rs3", &[(5, 10.0), (6, 10.0)]),
        ];
        let d = decide(&v, &LoadPolicy::default(), true).unwrap();
        assert_eq!(
            d,
            Decision {
                range: range(2),
                from: "rs1".into(),
                to: "rs2".into(),
                reason: Reason::Count
            }
        );
    }

    #[test]
    fn even_counts_move_the_range_that_evens_load_best() {
        // Gap 30,000: moving 14,000 leaves a gap of 2,000.
        let v = [
            server("rs1", &[(1, 14_000.0), (2, 16_000.0)]),
            server("rs2", &[(3, 0.0), (4, 0.0)]),
        ];
        let d = decide(&v, &LoadPolicy::default(), true).unwrap();
        assert_eq!((d.range, d.reason), (range(1), Reason::Load));
        assert_eq!((d.from.as_str(), d.to.as_str()), ("rs1", "rs2"));
        // Not during the cooldown, not when disabled.
        assert_eq!(decide(&v, &LoadPolicy::default(), false), None);
        let off = LoadPolicy {
            enabled: false,
            ..LoadPolicy::default()
        };
        assert_eq!(decide(&v, &off, true), None);
    }

    #[test]
    fn no_move_that_would_not_help() {
        let p = LoadPolicy::default();
        // One range hotter than the gap: moving it only moves the problem.
        let v = [
            server("rs1", &[(1, 50_000.0)]),
            server("rs2", &[(2, 1_000.0)]),
        ];
        assert_eq!(decide(&v, &p, true), None);
        // A gap below the minimum, or small next to the load.
        let v = [server("rs1", &[(1, 900.0)]), server("rs2", &[(2, 0.0)])];
        assert_eq!(decide(&v, &p, true), None);
        let v = [
            server("rs1", &[(1, 50_000.0), (2, 50_000.0)]),
            server("rs2", &[(3, 45_000.0), (4, 45_000.0)]),
        ];
        assert_eq!(decide(&v, &p, true), None);
        // A single server.
        assert_eq!(decide(&v[..1], &p, true), None);
    }

    proptest! {
        /// A count move only when counts differ by two or more, from the fullest to the
        /// emptiest; a load move only with even counts, and it shrinks the gap between the two
        /// servers by the policy's fraction.
        #[test]
        fn moves_always_improve_balance(
            servers in prop::collection::vec(prop::collection::vec(0.0f64..100_000.0, 0..6), 2..5)
        ) {
            let p = LoadPolicy::default();
            let mut t = 0;
            let views: Vec<ServerView> = servers.iter().enumerate().map(|(i, rates)| {
                ServerView {
                    location: format!("rs{i}"),
                    ranges: rates.iter().map(|&r| { t += 1; (range(t), r) }).collect(),
                }
            }).collect();
            let counts: Vec<usize> = views.iter().map(|v| v.ranges.len()).collect();
            let (cmax, cmin) = (*counts.iter().max().unwrap(), *counts.iter().min().unwrap());
            match decide(&views, &p, true) {
                None => prop_assert!(cmax < cmin + 2 || views.iter().all(|v| v.ranges.is_empty())),
                Some(d) => {
                    let from = views.iter().find(|v| v.location == d.from).unwrap();
                    let to = views.iter().find(|v| v.location == d.to).unwrap();
                    let rate = from.ranges.iter().find(|(r, _)| *r == d.range).unwrap().1;
                    match d.reason {
                        Reason::Count => {
                            prop_assert_eq!(from.ranges.len(), cmax);
                            prop_assert_eq!(to.ranges.len(), cmin);
                            prop_assert!(cmax >= cmin + 2);
                            prop_assert!(from.ranges.iter().all(|(_, r)| *r >= rate));
                        }
                        Reason::Table => prop_assert!(false, "one range per table here"),
                        Reason::Load => {
                            prop_assert!(cmax < cmin + 2);
                            let gap = from.load() - to.load();
                            let after = ((from.load() - rate) - (to.load() + rate)).abs();
                            prop_assert!(gap >= p.min_gap);
                            prop_assert!(after <= (1.0 - p.min_improvement) * gap + 1e-6);
                        }
                    }
                }
            }
        }
    }

    /// Applies decisions until there are none; returns the moves.
    fn settle(views: &mut [ServerView]) -> Vec<Decision> {
        let mut moves = Vec::new();
        while let Some(d) = decide(views, &LoadPolicy::default(), false) {
            assert!(moves.len() < 100, "no end: {moves:?}");
            let from = views.iter_mut().find(|v| v.location == d.from).unwrap();
            let at = from.ranges.iter().position(|(r, _)| *r == d.range).unwrap();
            let moved = from.ranges.remove(at);
            views
                .iter_mut()
                .find(|v| v.location == d.to)
                .unwrap()
                .ranges
                .push(moved);
            moves.push(d);
        }
        moves
    }

    fn ranges_of(v: &ServerView, t: u32) -> usize {
        v.ranges.iter().filter(|(r, _)| r.0 == t).count()
    }

    #[test]
    fn each_tables_ranges_are_spread_over_the_servers() {
        // Even totals, but each table on one server: swaps spread both.
        let t = |table: u32, i: u8| ((table, Some(vec![i]), None), f64::from(i));
        let mut views = [
            ServerView {
                location: "rs1".into(),
                ranges: (0..4).map(|i| t(1, i)).collect(),
            },
            ServerView {
                location: "rs2".into(),
                ranges: (0..4).map(|i| t(2, i)).collect(),
            },
        ];
        let moves = settle(&mut views);
        assert_eq!(moves[0].reason, Reason::Table);
        assert_eq!(moves[0].range, (1, Some(vec![0]), None), "the coldest");
        assert!(moves.len() <= 4, "{moves:?}");
        for v in &views {
            assert_eq!((ranges_of(v, 1), ranges_of(v, 2)), (2, 2), "{views:?}");
        }
        // Three servers, one big table and small ones: totals and every table within one.
        let mut views: Vec<ServerView> = (0..3)
            .map(|s| ServerView {
                location: format!("rs{s}"),
                ranges: Vec::new(),
            })
            .collect();
        views[0].ranges = (0..12).map(|i| t(7, i)).collect();
        views[1].ranges = (0..5).map(|i| t(3, i)).collect();
        views[2].ranges = vec![t(4, 0)];
        settle(&mut views);
        for table in [3, 4, 7] {
            let n: Vec<usize> = views.iter().map(|v| ranges_of(v, table)).collect();
            assert!(
                n.iter().max().unwrap() - n.iter().min().unwrap() <= 1,
                "{table}: {n:?}"
            );
        }
        let totals: Vec<usize> = views.iter().map(|v| v.ranges.len()).collect();
        assert!(
            totals.iter().max().unwrap() - totals.iter().min().unwrap() <= 1,
            "{totals:?}"
        );
    }

    #[test]
    fn the_load_cooldown_follows_the_clock() {
        let clock = Arc::new(ManualClock::new());
        let cooldown = Duration::from_secs(30);
        let mut c = LoadCooldown::new(clock.clone());
        assert!(c.allows(cooldown), "no load move yet");
        c.moved();
        assert!(!c.allows(cooldown));
        clock.advance(cooldown - Duration::from_nanos(1));
        assert!(!c.allows(cooldown), "allowed before the cooldown passed");
        clock.advance(Duration::from_nanos(1));
        assert!(c.allows(cooldown), "not allowed once the cooldown passed");
        assert!(!c.allows(cooldown + Duration::from_nanos(1)));
        // The next move starts the wait again.
        c.moved();
        assert!(!c.allows(cooldown));
        clock.advance(cooldown);
        assert!(c.allows(cooldown));
    }

    #[test]
    fn the_meter_smooths_rates_and_keeps_them_across_a_move() {
        let mut m = LoadMeter::default();
        let t0 = ManualClock::new().now();
        let s = Duration::from_secs(5);
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        m.record("rs1", [(range(1), 0)], at(0), s);
        assert_eq!(m.rate(&range(1)), 0.0);
        m.record("rs1", [(range(1), 10_000)], at(1), s);
        assert_eq!(m.rate(&range(1)), 10_000.0);
        // A quiet second pulls the rate down by 1/6 of the way.
        m.record("rs1", [(range(1), 10_000)], at(2), s);
        let r = m.rate(&range(1));
        assert!((r - 10_000.0 * 5.0 / 6.0).abs() < 1e-6, "{r}");
        // Moved: its counter starts over on rs2, the first report there is a baseline, and
        // the rate stays what it was.
        m.record("rs1", [], at(3), s);
        m.record("rs2", [(range(1), 0)], at(3), s);
        assert_eq!(m.rate(&range(1)), r);
        m.record("rs2", [(range(1), 6_000)], at(4), s);
        let r2 = m.rate(&range(1));
        assert!((r2 - (r + (6_000.0 - r) / 6.0)).abs() < 1e-6, "{r2}");
        // A counter that went back (the range was reloaded) is a new baseline.
        m.record("rs2", [(range(1), 100)], at(5), s);
        assert_eq!(m.rate(&range(1)), r2);
        // Not reported for ten smoothing periods: forgotten.
        m.forget("rs2");
        m.record("rs2", [], at(60), s);
        assert_eq!(m.rate(&range(1)), 0.0);
    }
}

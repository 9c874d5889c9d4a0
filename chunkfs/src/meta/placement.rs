//! Block placement: the live chunk servers a new block may go to, least loaded first, ties
//! broken by a draw from the metadata server's seeded random source.

use std::collections::HashMap;

use rand::Rng as _;
use rand::rngs::StdRng;

use super::ServerState;

/// The servers a new block may use, best first, as (rank, address): live ones not in
/// `exclude`, ordered by chunk count with a random tie-break. Servers are visited in address
/// order, so the same seed and the same servers give the same order (a `HashMap` alone would
/// not).
pub(super) fn candidates(
    servers: &HashMap<String, ServerState>,
    exclude: &[String],
    is_live: impl Fn(&ServerState) -> bool,
    rng: &mut StdRng,
) -> Vec<(u64, String)> {
    let mut eligible: Vec<(&String, &ServerState)> = servers
        .iter()
        .filter(|(a, s)| is_live(s) && !exclude.contains(a))
        .collect();
    eligible.sort_by(|x, y| x.0.cmp(y.0));
    let mut live: Vec<(u64, String)> = eligible
        .into_iter()
        .map(|(a, s)| (s.chunks * 16 + rng.random_range(0..16u64), a.clone()))
        .collect();
    live.sort();
    live
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    use rand::SeedableRng as _;

    use super::*;

    fn server(last_seen: Instant, chunks: u64) -> ServerState {
        ServerState {
            last_seen,
            chunks,
            reported: true,
            pending_delete: Vec::new(),
        }
    }

    /// Ten servers, every third one silent (dead), and the first 3 of 20 picks per seed.
    fn picks(seed: u64) -> Vec<Vec<String>> {
        let now = Instant::now();
        let stale = now.checked_sub(Duration::from_secs(60)).unwrap_or(now);
        let mut servers = HashMap::new();
        for i in 0..10u32 {
            let seen = if i.is_multiple_of(3) && stale < now {
                stale
            } else {
                now
            };
            servers.insert(format!("10.0.0.{i}:9000"), server(seen, 0));
        }
        let exclude = vec!["10.0.0.1:9000".to_string()];
        let live = |s: &ServerState| now.duration_since(s.last_seen) < Duration::from_secs(5);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = Vec::new();
        for _ in 0..20 {
            let chosen: Vec<String> = candidates(&servers, &exclude, live, &mut rng)
                .into_iter()
                .take(3)
                .map(|(_, a)| a)
                .collect();
            for a in &chosen {
                servers.get_mut(a).expect("a known server").chunks += 1;
            }
            out.push(chosen);
        }
        out
    }

    #[test]
    fn placement_is_repeatable_from_its_seed() {
        assert_eq!(picks(7), picks(7));
        assert_ne!(picks(7), picks(8));
    }

    #[test]
    fn placement_uses_distinct_live_servers_only() {
        for seed in 0..20 {
            for chosen in picks(seed) {
                assert_eq!(chosen.len(), 3, "{chosen:?}");
                let distinct: HashSet<&String> = chosen.iter().collect();
                assert_eq!(distinct.len(), 3, "two replicas on one server: {chosen:?}");
                for a in &chosen {
                    let i: u32 = a["10.0.0.".len()..a.len() - ":9000".len()]
                        .parse()
                        .expect("a test address");
                    assert!(!i.is_multiple_of(3), "dead server {a} chosen");
                    assert_ne!(i, 1, "excluded server {a} chosen");
                }
            }
        }
    }

    #[test]
    fn placement_prefers_the_least_loaded() {
        let now = Instant::now();
        let mut servers = HashMap::new();
        servers.insert("a:1".to_string(), server(now, 5));
        servers.insert("b:1".to_string(), server(now, 0));
        servers.insert("c:1".to_string(), server(now, 2));
        let mut rng = StdRng::seed_from_u64(1);
        let order: Vec<String> = candidates(&servers, &[], |_| true, &mut rng)
            .into_iter()
            .map(|(_, a)| a)
            .collect();
        assert_eq!(order, ["b:1", "c:1", "a:1"]);
    }
}

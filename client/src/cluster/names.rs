//! [`NameCache`]: the cluster client's cache of table ids (by path) and schemas (by id), as
//! Hypertable's client keeps its table cache and Accumulo its ZooCache. Without it every
//! `table_schema`, `mutator` and `scanner` call costs one to three Hyperspace reads (each a
//! read-index round through the Raft leader), which dominated a point query on a cluster.
//!
//! Invalidation: every table DDL (create, alter, rename, drop) runs as a master operation that
//! is logged under `/ht/ops` before its first step and deleted after its last. The cache holds
//! a Hyperspace handle on `/ht/ops` that reports both (CHILD_NODE_ADDED, CHILD_NODE_REMOVED);
//! any event, a lost-events notice, jeopardy or expiry of the session empties the cache. A
//! read that raced an event is not cached: every entry is put only if the cache's epoch, taken
//! before the Hyperspace reads, has not moved since. DDL through this client empties the cache
//! when it returns, so the client always sees its own changes. Another client's DDL is seen
//! once its event arrives (a keep-alive round trip after the operation ends): in that window a
//! query may use the old schema, as in Hypertable. Range moves and recoveries are operations
//! too: they empty the cache, which costs a few reads.
//!
//! Bounded by [`ClusterOptions::table_cache_entries`](super::ClusterOptions) entries of each
//! kind; 0 turns the cache off.

use std::collections::HashMap;
use std::sync::Arc;

use common::TableSchema;
use hyperspace::client::{ClientEvent, Hyperspace};
use hyperspace::command::{event_mask, flags};
use parking_lot::Mutex;
use tokio::sync::{OnceCell, mpsc};

use super::layout::OPS;

/// Whether the handle on `/ht/ops` reports events, as far as the cache knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// Events arrive: entries may be cached.
    Live,
    /// The session is in jeopardy (events may be late) or gone: nothing is cached.
    Down,
}

#[derive(Debug)]
struct State {
    watch: Watch,
    /// Moves on every invalidation.
    epoch: u64,
    ids: HashMap<String, u32>,
    schemas: HashMap<u32, Arc<TableSchema>>,
}

/// Table ids and schemas read from Hyperspace, kept until a table operation may have changed
/// them (see the module documentation).
#[derive(Debug)]
pub(crate) struct NameCache {
    capacity: usize,
    state: Mutex<State>,
    /// The handle on `/ht/ops`, opened before the first entry is cached.
    handle: OnceCell<u64>,
}

/// An epoch taken before reading Hyperspace: what was read may be cached under it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket(u64);

impl NameCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            state: Mutex::new(State {
                watch: Watch::Live,
                epoch: 0,
                ids: HashMap::new(),
                schemas: HashMap::new(),
            }),
            handle: OnceCell::new(),
        }
    }

    pub(crate) fn id(&self, path: &str) -> Option<u32> {
        self.state.lock().ids.get(path).copied()
    }

    pub(crate) fn schema(&self, id: u32) -> Option<Arc<TableSchema>> {
        self.state.lock().schemas.get(&id).cloned()
    }

    /// A ticket for reads about to be made, once the handle that reports changes is open;
    /// `None` when nothing may be cached (no handle, the session in doubt, the cache off).
    pub(crate) async fn ticket(&self, hs: &Hyperspace) -> Option<Ticket> {
        if self.capacity == 0 {
            return None;
        }
        self.handle
            .get_or_try_init(|| {
                hs.open(
                    OPS,
                    flags::READ,
                    event_mask::CHILD_NODE_ADDED | event_mask::CHILD_NODE_REMOVED,
                )
            })
            .await
            .ok()?;
        let s = self.state.lock();
        (s.watch == Watch::Live).then_some(Ticket(s.epoch))
    }

    pub(crate) fn put_id(&self, ticket: Option<Ticket>, path: &str, id: u32) {
        self.put(ticket, |s, capacity| {
            bound(&mut s.ids, capacity);
            s.ids.insert(path.to_string(), id);
        });
    }

    pub(crate) fn put_schema(&self, ticket: Option<Ticket>, schema: &Arc<TableSchema>) {
        self.put(ticket, |s, capacity| {
            bound(&mut s.schemas, capacity);
            s.schemas.insert(schema.id, schema.clone());
        });
    }

    fn put(&self, ticket: Option<Ticket>, f: impl FnOnce(&mut State, usize)) {
        let Some(Ticket(epoch)) = ticket else {
            return;
        };
        let mut s = self.state.lock();
        if s.watch == Watch::Live && s.epoch == epoch {
            f(&mut s, self.capacity);
        }
    }

    /// Forgets everything (a table operation may have run).
    pub(crate) fn clear(&self) {
        let mut s = self.state.lock();
        s.epoch += 1;
        s.ids.clear();
        s.schemas.clear();
    }

    fn set_watch(&self, watch: Watch) {
        self.state.lock().watch = watch;
        self.clear();
    }

    /// Reads the session's events until the session ends: each may mean a table changed.
    pub(crate) async fn follow(self: Arc<Self>, mut events: mpsc::Receiver<ClientEvent>) {
        while let Some(e) = events.recv().await {
            match e {
                ClientEvent::Node(_) | ClientEvent::EventsLost => self.clear(),
                ClientEvent::Jeopardy | ClientEvent::Expired => self.set_watch(Watch::Down),
                ClientEvent::Safe => self.set_watch(Watch::Live),
            }
        }
        self.set_watch(Watch::Down);
    }
}

/// Makes room for one more entry: at capacity, one entry goes (any: the cache holds what a
/// client's working set of tables needs, and a miss costs one read).
fn bound<K: Clone + Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>, capacity: usize) {
    if map.len() >= capacity
        && let Some(k) = map.keys().next().cloned()
    {
        map.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(cache: &NameCache) -> Option<Ticket> {
        let s = cache.state.lock();
        (s.watch == Watch::Live).then_some(Ticket(s.epoch))
    }

    #[test]
    fn a_read_that_raced_an_invalidation_is_not_cached() {
        let c = NameCache::new(8);
        let t = live(&c);
        c.clear();
        c.put_id(t, "/t", 7);
        assert_eq!(c.id("/t"), None);
        let t = live(&c);
        c.put_id(t, "/t", 7);
        assert_eq!(c.id("/t"), Some(7));
        c.clear();
        assert_eq!(c.id("/t"), None);
    }

    #[test]
    fn nothing_is_cached_while_the_session_is_in_doubt() {
        let c = NameCache::new(8);
        c.set_watch(Watch::Down);
        assert!(live(&c).is_none());
        let epoch = c.state.lock().epoch;
        c.put_id(Some(Ticket(epoch)), "/t", 7);
        assert_eq!(c.id("/t"), None);
        c.set_watch(Watch::Live);
        let t = live(&c);
        c.put_id(t, "/t", 7);
        assert_eq!(c.id("/t"), Some(7));
    }

    #[test]
    fn the_cache_is_bounded() {
        let c = NameCache::new(3);
        for i in 0..10u32 {
            let t = live(&c);
            c.put_id(t, &format!("/t{i}"), i);
            let mut s = TableSchema::new(i, format!("/t{i}"));
            s.id = i;
            c.put_schema(t, &Arc::new(s));
        }
        let s = c.state.lock();
        assert_eq!((s.ids.len(), s.schemas.len()), (3, 3));
        assert_eq!(s.ids.get("/t9"), Some(&9));
    }
}

//! The attribute operations of the state machine: `Target` resolution, name and size checks,
//! set / delete / increment, and their ATTR_* events.

use super::tree::shorten;
use super::{Fail, OpResult, StateMachine, fail};
use crate::command::{ErrorCode, LockMode, Reply, Target, event_mask};

impl StateMachine {
    /// The path a `Target` names: a live handle of the session, or (handle 0) a checked path.
    pub(super) fn target(&self, sid: u64, target: Option<&Target>) -> Result<String, Fail> {
        let Some(t) = target else {
            return fail(ErrorCode::InvalidArgument, "no target");
        };
        if t.handle != 0 {
            return Ok(self.live_handle(sid, t.handle)?.0);
        }
        self.check_path(&t.path)?;
        Ok(t.path.clone())
    }

    pub(super) fn check_attr(&self, name: &str, value: Option<&[u8]>) -> Result<(), Fail> {
        if name.is_empty() {
            return fail(ErrorCode::InvalidArgument, "empty attribute name");
        }
        if name.len() > self.limits.max_path_bytes {
            return fail(
                ErrorCode::InvalidArgument,
                format!(
                    "attribute name of {} bytes (limit {})",
                    name.len(),
                    self.limits.max_path_bytes
                ),
            );
        }
        if let Some(v) = value
            && v.len() > self.limits.max_attr_value_bytes
        {
            return fail(
                ErrorCode::LimitExceeded,
                format!(
                    "attribute {:?}: value of {} bytes (limit {})",
                    shorten(name),
                    v.len(),
                    self.limits.max_attr_value_bytes
                ),
            );
        }
        Ok(())
    }

    pub(super) fn attr_set(
        &mut self,
        sid: u64,
        t: Option<&Target>,
        name: &str,
        value: &[u8],
    ) -> OpResult {
        let path = self.target(sid, t)?;
        self.check_attr(name, Some(value))?;
        self.existing(&path)?;
        self.store_attr(&path, name, value.to_vec());
        Ok(Reply::Done(Default::default()))
    }

    pub(super) fn store_attr(&mut self, path: &str, name: &str, value: Vec<u8>) {
        if let Some(n) = self.tree.get_mut(path) {
            n.attrs.insert(name.to_string(), value);
            self.notify(path, event_mask::ATTR_SET, name, LockMode::None, 0, 0);
        }
    }

    pub(super) fn attr_del(&mut self, sid: u64, t: Option<&Target>, name: &str) -> OpResult {
        let path = self.target(sid, t)?;
        self.check_attr(name, None)?;
        self.existing(&path)?;
        let removed = self.tree.get_mut(&path).and_then(|n| n.attrs.remove(name));
        if removed.is_none() {
            return fail(
                ErrorCode::NotFound,
                format!("{:?} has no attribute {:?}", shorten(&path), shorten(name)),
            );
        }
        self.notify(&path, event_mask::ATTR_DEL, name, LockMode::None, 0, 0);
        Ok(Reply::Done(Default::default()))
    }

    pub(super) fn attr_incr(
        &mut self,
        sid: u64,
        t: Option<&Target>,
        name: &str,
        delta: i64,
    ) -> OpResult {
        let path = self.target(sid, t)?;
        self.check_attr(name, None)?;
        let node = self.existing(&path)?;
        let old = match node.attrs.get(name) {
            None => 0,
            Some(v) => match std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            {
                Some(n) => n,
                None => {
                    return fail(
                        ErrorCode::InvalidArgument,
                        format!("attribute {:?} is not a decimal integer", shorten(name)),
                    );
                }
            },
        };
        let Some(new) = old.checked_add(delta) else {
            return fail(
                ErrorCode::InvalidArgument,
                format!("attribute {:?}: {old} + {delta} overflows", shorten(name)),
            );
        };
        self.store_attr(&path, name, new.to_string().into_bytes());
        Ok(Reply::Int(new))
    }
}

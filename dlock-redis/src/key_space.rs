//! A lock's server and key prefix, for the helpers that keep records of their own there
//! (fenced writes, idempotency records).

use std::sync::Arc;

use crate::RedisLock;
use crate::node::Node;

/// The server a [`RedisLock`] talks to and the prefix its keys carry.
#[derive(Clone)]
pub(crate) struct KeySpace {
    pub(crate) node: Arc<Node>,
    pub(crate) prefix: String,
}

impl std::fmt::Debug for KeySpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the node holds connections, not worth printing
        f.debug_struct("KeySpace")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisLock {
    /// This lock's server and key prefix.
    pub(crate) fn key_space(&self) -> KeySpace {
        KeySpace {
            node: Arc::clone(&self.node),
            prefix: self.opts.prefix.clone(),
        }
    }
}

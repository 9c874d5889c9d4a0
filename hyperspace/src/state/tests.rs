//! Unit tests of the state machine rules a random model test covers poorly.

use super::*;

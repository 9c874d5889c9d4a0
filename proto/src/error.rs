//! [`ClientError`], the error at the client interface (embedded or cluster, and the master's DDL
//! answers, which carry it exactly: [`crate::master::DdlReply`]), and the checks of the absolute
//! names every layer shares ([`normalize_path`], [`split_path`]).

use common::{ErrorKind, HasErrorKind};

/// An error at the client interface. Messages name the namespace or table concerned.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("namespace '{0}' does not exist")]
    NamespaceNotFound(String),
    #[error("namespace '{0}' already exists")]
    NamespaceExists(String),
    #[error("namespace '{0}' is not empty")]
    NamespaceNotEmpty(String),
    #[error("table '{0}' does not exist")]
    TableNotFound(String),
    #[error("table '{0}' already exists")]
    TableExists(String),
    #[error("{0}")]
    InvalidInput(String),
    /// A failure of the storage layer; `kind` says what the caller can do about it, and
    /// `source` is the error it came from when there is one (an engine, Hyperspace or rpc
    /// error in this process; `None` for one that crossed the wire as text).
    #[error("{message}")]
    Storage {
        kind: ErrorKind,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl ClientError {
    /// The coarse kind for callers deciding what to do.
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self {
            Self::NamespaceNotFound(_) | Self::TableNotFound(_) => K::NotFound,
            Self::NamespaceExists(_) | Self::TableExists(_) => K::AlreadyExists,
            Self::NamespaceNotEmpty(_) | Self::InvalidInput(_) => K::InvalidInput,
            Self::Storage { kind, .. } => *kind,
        }
    }

    /// A storage error with no underlying error (one known only as text).
    pub fn storage(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self::Storage {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A storage error wrapping `source`, of `source`'s kind, its message `"<what>: <source>"`.
    pub fn wrap(what: &str, source: impl HasErrorKind) -> Self {
        Self::Storage {
            kind: source.error_kind(),
            message: format!("{what}: {source}"),
            source: Some(Box::new(source)),
        }
    }

    /// [`ErrorKind::Unavailable`]: retry later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::storage(ErrorKind::Unavailable, message)
    }
}

/// A Hyperspace client error as a [`ClientError`] (`"hyperspace: ..."`, kept as the source; a
/// TLS refusal is `Internal`, anything else `Unavailable`).
pub fn hs_err(e: impl HasErrorKind) -> ClientError {
    ClientError::wrap("hyperspace", e)
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// Splits an absolute path into its parent namespace and last component:
/// `/a/b/t` -> (`/a/b`, `t`), `/t` -> (`/`, `t`).
pub fn split_path(path: &str) -> Result<(String, String)> {
    let norm = normalize_path(path)?;
    if norm == "/" {
        return Err(ClientError::InvalidInput(
            "the root namespace has no name".into(),
        ));
    }
    let i = norm.rfind('/').expect("normalized paths start with /");
    let parent = if i == 0 {
        "/".to_string()
    } else {
        norm[..i].to_string()
    };
    Ok((parent, norm[i + 1..].to_string()))
}

/// Checks an absolute path and removes duplicate and trailing slashes.
pub fn normalize_path(path: &str) -> Result<String> {
    if !path.starts_with('/') {
        return Err(ClientError::InvalidInput(format!(
            "'{path}' is not an absolute name"
        )));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    for p in &parts {
        if *p == "." || *p == ".." {
            return Err(ClientError::InvalidInput(format!("bad name '{path}'")));
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(normalize_path("//a//b/").unwrap(), "/a/b");
        assert_eq!(normalize_path("/").unwrap(), "/");
        assert!(normalize_path("a").is_err());
        assert!(normalize_path("/a/../b").is_err());
        assert_eq!(split_path("/a/b/t").unwrap(), ("/a/b".into(), "t".into()));
        assert_eq!(split_path("/t").unwrap(), ("/".into(), "t".into()));
        assert!(split_path("/").is_err());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("disk on fire")]
    struct Fire;
    impl HasErrorKind for Fire {
        fn error_kind(&self) -> ErrorKind {
            ErrorKind::Corruption
        }
    }

    #[test]
    fn a_wrapped_storage_error_keeps_its_kind_and_source() {
        let e = ClientError::wrap("engine", Fire);
        assert_eq!(e.kind(), ErrorKind::Corruption);
        assert_eq!(e.to_string(), "engine: disk on fire");
        let source = std::error::Error::source(&e).expect("the source is kept");
        assert_eq!(source.to_string(), "disk on fire");
        assert!(std::error::Error::source(&ClientError::unavailable("x")).is_none());
    }
}

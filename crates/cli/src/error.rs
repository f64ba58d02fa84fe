//! The CLI's error: any library error (each crate has its own typed enum) or a message.
//! Like `anyhow::Error` it deliberately does not implement `std::error::Error`, so that `?`
//! converts every typed error into it.
pub struct Error(Box<dyn std::error::Error + Send + Sync>);

impl Error {
    pub fn msg(m: impl Into<String>) -> Self {
        Error(m.into().into())
    }

    /// Whether the error is only the other party's disappearance (the channel closed under
    /// it), so that the other party's own error, if any, is the cause worth reporting.
    pub fn is_peer_closed(&self) -> bool {
        let mut e: Option<&(dyn std::error::Error + 'static)> = Some(self.0.as_ref());
        while let Some(x) = e {
            if matches!(
                x.downcast_ref::<secinfer_net::NetError>(),
                Some(secinfer_net::NetError::Closed)
            ) {
                return true;
            }
            e = x.source();
        }
        false
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Error {
    fn from(e: E) -> Self {
        Error(Box::new(e))
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut src = self.0.source();
        while let Some(s) = src {
            write!(f, ": {s}")?;
            src = s.source();
        }
        Ok(())
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

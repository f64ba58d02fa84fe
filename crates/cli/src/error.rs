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
        // Many library errors already print their source inline ("{path}: {source}") and keep
        // it as `source()` too: a link whose text the line already ends with is not repeated.
        let mut line = self.0.to_string();
        let mut src = self.0.source();
        while let Some(s) = src {
            let text = s.to_string();
            if !line.ends_with(&text) {
                line = format!("{line}: {text}");
            }
            src = s.source();
        }
        f.write_str(&line)
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    /// A file error names its file and the OS's reason once, though the reason is both inline
    /// in the library error's text and its `source()`.
    #[test]
    fn a_file_error_prints_its_reason_once() {
        let e = secinfer_nn::Model::load("/nonexistent/model-dir")
            .err()
            .unwrap();
        let text = Error::from(e).to_string();
        let reason = std::io::Error::from_raw_os_error(2).to_string();
        assert!(text.contains("model.json"), "{text}");
        assert_eq!(text.matches(&reason).count(), 1, "{text}");
    }
}

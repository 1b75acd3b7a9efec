//! Client errors: the API's `Status` answers, transport failures and undecodable bodies.

use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{code} {reason}: {message}")]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    #[error("request failed: {0}")]
    Http(reqwest::Error),
    #[error("decoding the answer: {0}")]
    Decode(serde_json::Error),
    #[error("encoding the request: {0}")]
    Encode(serde_json::Error),
    #[error("client configuration: {0}")]
    Config(String),
    #[error("watch stream: {0}")]
    Watch(String),
}

impl ClientError {
    pub fn from_status(code: u16, body: &[u8]) -> ClientError {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        ClientError::Api {
            code,
            reason: v["reason"].as_str().unwrap_or_default().to_string(),
            message: v["message"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned()),
        }
    }

    pub fn code(&self) -> Option<u16> {
        match self {
            ClientError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    /// `410 Gone`: a watch must relist.
    pub fn is_gone(&self) -> bool {
        self.code() == Some(410)
    }

    /// Worth retrying later: transport errors, conflicts, throttling and server errors.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Http(_) | ClientError::Watch(_) => true,
            ClientError::Api { code, .. } => matches!(code, 409 | 429 | 500..=599),
            _ => false,
        }
    }
}

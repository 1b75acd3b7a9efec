//! Links in a proxied answer made to go through the proxy again, as upstream's proxy transport
//! rewrites them: an absolute path (or a URL on the backend's own host) gets the proxy prefix
//! (`/api/v1/namespaces/NS/services/NAME:PORT/proxy`) in front, unless it has it already;
//! relative links and other hosts' URLs are left alone. Applied to `Location` headers and to
//! the URL attributes of HTML pages.

use super::proxy_target::backend_path;

/// How links of one proxied answer are rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewriter {
    /// The proxy path in front of the backend's paths.
    pub prefix: String,
    /// The backend's `host:port` (links to it are links through the proxy).
    pub backend_host: String,
    /// The `Host` the client asked for (links to it keep their scheme and host).
    pub request_host: String,
}

/// A URL split into what the rewriting looks at.
struct Parts<'a> {
    /// `scheme:` (with its colon), or empty.
    scheme: &'a str,
    /// The host after `//`; `None` without an authority.
    host: Option<&'a str>,
    path: &'a str,
    /// `?query#fragment`, as it was.
    tail: &'a str,
}

fn split(url: &str) -> Parts<'_> {
    let scheme_end = url
        .find(':')
        .filter(|&i| {
            let s = &url[..i];
            !s.is_empty()
                && s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
        .map_or(0, |i| i + 1);
    let (scheme, rest) = url.split_at(scheme_end);
    let (host, rest) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (Some(&after[..end]), &after[end..])
        }
        None => (None, rest),
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    Parts {
        scheme,
        host,
        path: &rest[..end],
        tail: &rest[end..],
    }
}

impl Rewriter {
    /// The link `url` as the client should follow it.
    pub fn rewrite(&self, url: &str) -> String {
        let p = split(url);
        let host = p.host.unwrap_or_default();
        let different_host =
            !host.is_empty() && host != self.backend_host && host != self.request_host;
        // An opaque URL (`mailto:x`) or a relative path is not the backend's to rewrite.
        let relative = !p.path.starts_with('/');
        if different_host || relative || (!p.scheme.is_empty() && p.host.is_none()) {
            return url.to_string();
        }
        // A link to the host the client asked for keeps it; one to the backend becomes a path
        // on the proxy's host.
        let origin = if !host.is_empty() && host == self.request_host {
            format!("{}//{host}", p.scheme)
        } else {
            String::new()
        };
        let path = if p.path.starts_with(&self.prefix) {
            p.path.to_string()
        } else {
            backend_path(&format!("{}/{}", self.prefix, p.path))
        };
        format!("{origin}{path}{}", p.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewriter() -> Rewriter {
        Rewriter {
            prefix: "/api/v1/namespaces/ns/services/web:80/proxy".into(),
            backend_host: "10.42.0.5:8080".into(),
            request_host: "localhost:8001".into(),
        }
    }

    #[test]
    fn links_on_the_backend_go_through_the_proxy() {
        let r = rewriter();
        let p = "/api/v1/namespaces/ns/services/web:80/proxy";
        let cases = [
            ("/login", format!("{p}/login")),
            ("/dir/", format!("{p}/dir/")),
            ("/a/../b?x=1#top", format!("{p}/b?x=1#top")),
            ("http://10.42.0.5:8080/next", format!("{p}/next")),
            (
                "http://localhost:8001/next",
                format!("http://localhost:8001{p}/next"),
            ),
            (&format!("{p}/already"), format!("{p}/already")),
            ("relative/page", "relative/page".to_string()),
            ("http://example.com/x", "http://example.com/x".to_string()),
            ("//example.com/x", "//example.com/x".to_string()),
            ("mailto:a@b", "mailto:a@b".to_string()),
            ("http://10.42.0.5:8080", "http://10.42.0.5:8080".to_string()),
            ("?page=2", "?page=2".to_string()),
        ];
        for (url, want) in cases {
            assert_eq!(r.rewrite(url), want, "{url}");
        }
    }
}

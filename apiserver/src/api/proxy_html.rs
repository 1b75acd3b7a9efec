//! The links in a proxied HTML page, rewritten as upstream's proxy transport rewrites them:
//! the URL-valued attributes of the tags it lists (`a href`, `img src`, `form action` …) go
//! through [`Rewriter`]. The page is parsed by `lol_html`, a streaming HTML rewriter; a page
//! that is not UTF-8 is left as it is (upstream assumes UTF-8 too).

use super::proxy_rewrite::Rewriter;

/// The URL-valued attributes of each tag (upstream's list, from the HTML 4 and 5 specs).
fn url_attributes(tag: &str) -> &'static [&'static str] {
    match tag {
        "a" | "area" | "base" | "link" => &["href"],
        "applet" => &["codebase"],
        "audio" | "embed" | "script" | "source" => &["src"],
        "blockquote" | "del" | "ins" | "q" => &["cite"],
        "body" => &["background"],
        "button" => &["formaction"],
        "command" => &["icon"],
        "form" => &["action"],
        "frame" | "iframe" => &["longdesc", "src"],
        "head" => &["profile"],
        "html" => &["manifest"],
        "img" => &["longdesc", "src", "usemap"],
        "input" => &["src", "usemap", "formaction"],
        "object" => &["classid", "codebase", "data", "usemap"],
        "video" => &["poster", "src"],
        _ => &[],
    }
}

/// Whether a `Content-Type` is HTML (`text/html`, whatever its parameters).
pub fn is_html(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/html"))
}

/// `page` with its links rewritten; `None` when it cannot be (not UTF-8, or not parseable).
pub fn rewrite(page: &[u8], rewriter: &Rewriter) -> Option<String> {
    let text = std::str::from_utf8(page).ok()?;
    let settings = lol_html::RewriteStrSettings::new().append_element_content_handler(
        lol_html::element!("*", |el| {
            let tag = el.tag_name();
            for &attr in url_attributes(&tag) {
                if let Some(value) = el.get_attribute(attr) {
                    el.set_attribute(attr, &rewriter.rewrite(&value))?;
                }
            }
            Ok(())
        }),
    );
    lol_html::rewrite_str(text, settings).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_links_in_listed_attributes_go_through_the_proxy() {
        let r = Rewriter {
            prefix: "/api/v1/namespaces/ns/pods/p:80/proxy".into(),
            backend_host: "10.42.0.5:80".into(),
            request_host: "localhost:8001".into(),
        };
        let page = br#"<html><body><a href="/x">x</a><img src="http://10.42.0.5:80/i.png"><a href="rel">r</a><a href="http://other/">o</a><p title="/not-a-link">t</p><form action="/post"></form></body></html>"#;
        let got = rewrite(page, &r).expect("rewrites");
        let p = "/api/v1/namespaces/ns/pods/p:80/proxy";
        assert_eq!(
            got,
            format!(
                r#"<html><body><a href="{p}/x">x</a><img src="{p}/i.png"><a href="rel">r</a><a href="http://other/">o</a><p title="/not-a-link">t</p><form action="{p}/post"></form></body></html>"#
            )
        );
        assert_eq!(rewrite(b"\xff\xfe", &r), None);
    }

    #[test]
    fn html_is_told_by_its_media_type() {
        assert!(is_html("text/html"));
        assert!(is_html("text/html; charset=utf-8"));
        assert!(!is_html("text/plain"));
        assert!(!is_html("application/xhtml+xml"));
    }
}

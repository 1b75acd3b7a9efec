//! Log set-up shared by the binaries: what is logged comes from `BERTH_LOG`, else `RUST_LOG`
//! (tracing filter directives: `debug`, `berth_agent::pod=trace,info`), else `--v` (the
//! kubelet's verbosity: 0–1 info, 2–3 debug, 4 and up trace); lines go to stderr as text, or
//! as one JSON object each with `--log-format json`.

use tracing_subscriber::EnvFilter;

/// The values `--log-format` takes.
pub const FORMATS: [&str; 2] = ["text", "json"];

/// The filter directive `--v N` stands for.
pub fn level_of_verbosity(v: u8) -> &'static str {
    match v {
        0 | 1 => "info",
        2 | 3 => "debug",
        _ => "trace",
    }
}

/// Installs the global subscriber.
pub fn init(verbosity: u8, format: &str) {
    let filter = EnvFilter::try_from_env("BERTH_LOG")
        .or_else(|_| EnvFilter::try_from_env("RUST_LOG"))
        .unwrap_or_else(|_| EnvFilter::new(level_of_verbosity(verbosity)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().with_current_span(false).init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels_as_the_kubelets_does() {
        assert_eq!(level_of_verbosity(0), "info");
        assert_eq!(level_of_verbosity(2), "debug");
        assert_eq!(level_of_verbosity(9), "trace");
    }
}

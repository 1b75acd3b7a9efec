//! `berth-agent`: placeholder entry point until the agent's run loop lands.

fn main() {
    eprintln!("berth-agent: the node agent is not wired up yet");
    std::process::exit(2);
}

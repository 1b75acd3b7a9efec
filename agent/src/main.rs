//! berth-agent: placeholder until the agent issue lands.
fn main() {}

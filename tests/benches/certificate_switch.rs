//! Serving-certificate renewal benchmark (prints figures, never fails on them): how long a
//! running controller takes from a new serving certificate on disk (`berth-controller
//! certificate renew`) to handing it to new TLS handshakes, and the watch delivery latency an
//! open watch sees while certificates are switched under it, next to the same latency without
//! switches measured in the same run. `BERTH_BENCH_SWITCHES` sets how many switches (default
//! 5); `BERTH_CONTROLLER_BIN` picks the binary.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use berth_tests::Controller;
use berth_tests::bench::{built, env_usize};
use berth_tests::client::{AsyncApi, Credentials, Req};
use berth_tests::controller::controller_binary;
use berth_tests::objects::namespace;
use berth_tests::pki::presented_serial;
use berth_tests::stats::Samples;

/// The aim the issue sets for the watch: no extra latency across a switch.
const AIM_WATCH: &str = "aim: no extra latency";
/// Writes per watch run, paced so a run spans several switches.
const WRITES: usize = 400;
const PAUSE: Duration = Duration::from_millis(50);

fn main() {
    let switches = env_usize("BERTH_BENCH_SWITCHES", 5);
    let bin = controller_binary();
    let build = built(&bin);
    println!("certificate_switch bench: {build}, switches={switches}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    let c = Controller::start();
    let api = AsyncApi::new(c.endpoint(Credentials::ClientCert(c.admin_identity())));
    rt.block_on(async {
        for ns in ["bench-quiet", "bench-switching"] {
            let reply = api
                .send(&Req::post("/api/v1/namespaces", &namespace(ns)))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(reply.status, 201, "{}", reply.describe());
        }
    });

    // From files on disk to new handshakes: the controller compares the files with what it
    // serves every few seconds, so this is mostly that poll.
    let mut pickup = Samples::new();
    for _ in 0..switches {
        let before = presented_serial(c.port(), &c.ca_pem()).unwrap_or_else(|e| panic!("{e}"));
        let run = c.subcommand(&["certificate", "renew"]);
        assert!(run.success(), "{}", run.describe());
        let written = Instant::now();
        loop {
            match presented_serial(c.port(), &c.ca_pem()) {
                Ok(s) if s != before => break,
                _ if written.elapsed() > Duration::from_secs(30) => {
                    panic!("no new serving certificate 30 s after `certificate renew`")
                }
                // not ordering: the probe interval of a measurement
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        pickup.push(written.elapsed());
    }
    println!(
        "serving_certificate_pickup_ms {} (n={switches}; from `certificate renew` done to the \
         first new handshake given the new certificate; the swap itself is one pointer store, \
         the rest is the controller's 5 s file poll)",
        pickup.p50_p99_ms()
    );

    // An open watch, without and then with switches under it.
    let mut quiet = rt.block_on(berth_tests::watch_delivery::measure(
        &api,
        "bench-quiet",
        "q",
        WRITES,
        PAUSE,
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let switched = std::thread::scope(|s| {
        let stop2 = stop.clone();
        let c = &c;
        let renewer = s.spawn(move || {
            let mut n = 0;
            while !stop2.load(Ordering::Relaxed) {
                let run = c.subcommand(&["certificate", "renew"]);
                assert!(run.success(), "{}", run.describe());
                n += 1;
                // not ordering: spacing the switches over the run
                std::thread::sleep(Duration::from_secs(3));
            }
            n
        });
        let delivery = rt.block_on(berth_tests::watch_delivery::measure(
            &api,
            "bench-switching",
            "s",
            WRITES,
            PAUSE,
        ));
        stop.store(true, Ordering::Relaxed);
        let renewals = renewer
            .join()
            .unwrap_or_else(|_| panic!("renewer panicked"));
        (delivery, renewals)
    });
    let (mut switching, renewals) = switched;
    println!(
        "watch_delivery_latency_ms without switches {}",
        quiet.describe()
    );
    println!(
        "watch_delivery_latency_ms across {renewals} certificate renewals {} ({AIM_WATCH})",
        switching.describe()
    );
}

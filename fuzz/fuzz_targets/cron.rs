//! Fuzz target: CronJob schedules. The first line is parsed alone and its next runs computed
//! (`cron::Schedule`), and, with the second line as `spec.timeZone`, checked as part of a
//! CronJob through admission.
#![no_main]

use berth_shared::admission::{Operation, admit};
use berth_shared::cron::Schedule;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let (schedule, zone) = match s.split_once('\n') {
        Some((schedule, zone)) => (schedule, Some(zone)),
        None => (s, None),
    };
    if let Ok(parsed) = Schedule::parse(schedule) {
        // The next-run search must end (robfig gives up after five years) and move forward.
        let start: jiff::Timestamp = "2024-02-28T23:59:30Z".parse().expect("a timestamp");
        let mut at = start;
        for _ in 0..3 {
            match parsed.next(at) {
                Some(next) => {
                    assert!(next > at, "{schedule:?}: {next} is not after {at}");
                    at = next;
                }
                None => break,
            }
        }
    }
    let mut cron_job = json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c", "namespace": "default", "uid": "u"},
        "spec": {
            "schedule": schedule,
            "timeZone": zone,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]
            }}}}
        }
    });
    let _ = admit("CronJob", Operation::Create, &mut cron_job, None);
});

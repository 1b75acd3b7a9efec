//! Fuzz target: CronJob schedules. The first line is checked alone (`validate_schedule`) and,
//! with the second line as `spec.timeZone`, as part of a CronJob through admission.
#![no_main]

use berth_shared::admission::{Operation, admit, validate_schedule};
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
    let _ = validate_schedule(schedule);
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

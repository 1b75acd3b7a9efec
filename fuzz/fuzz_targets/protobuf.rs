//! Fuzz target: a protobuf request body (`berth_shared::protobuf`). Decoding never panics or
//! overflows the stack, and an object that decodes survives a round trip: encoding its JSON
//! form and decoding that gives the same JSON.
#![no_main]

use berth_shared::protobuf::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(object) = decode(data) else {
        return;
    };
    let bytes = match encode(&object) {
        Ok(bytes) => bytes,
        Err(e) => panic!("a decoded object does not encode: {e}: {object}"),
    };
    match decode(&bytes) {
        Ok(again) => assert_eq!(again, object, "the round trip changed the object"),
        Err(e) => panic!("an encoded object does not decode: {e}: {object}"),
    }
});

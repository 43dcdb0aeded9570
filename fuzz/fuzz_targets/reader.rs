//! Fuzz target: any byte string fed to the reader, verifier and printer must produce either
//! a kernel that round-trips or diagnostics, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match smemsync::reader::parse(text) {
        Err(d) => {
            let _ = d.render("fuzz", text, false);
        }
        Ok(m) => {
            let clean = m.kernels.iter().all(|k| smemsync::verify::verify(k).is_empty());
            if clean {
                let printed = smemsync::emit::text::print_kernels(&m.kernels);
                let again = smemsync::reader::parse(&printed).expect("printed kernels parse");
                assert_eq!(smemsync::emit::text::print_kernels(&again.kernels), printed);
            }
        }
    }
});

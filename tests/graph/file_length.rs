//! Source files stay short enough to read in one sitting: none over 850 lines (issue 23's
//! rule; split a growing family into its layout's files instead). Generated files (marked
//! `@generated` in their first lines, e.g. protobuf types) are not read by people.

use crate::architecture::rust_files;
use std::path::Path;

const MAX_LINES: usize = 850;

#[test]
fn no_source_file_is_over_850_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 50,
        "the scan found only {} files",
        files.len()
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let src = std::fs::read_to_string(f).expect("readable source");
            let generated = src.lines().take(5).any(|l| l.contains("@generated"));
            let n = src.lines().count();
            (n > MAX_LINES && !generated).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

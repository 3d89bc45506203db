//! Runs the fuzz targets on their stored inputs outside AFL++, for valgrind's memcheck and for
//! reproducing a crash: `fuzz_replay <target> [files...]` (no files: the target's corpus and
//! regressions under fuzz/), `fuzz_replay --write-seeds` (seeds for every target whose corpus
//! directory is empty), `fuzz_replay --list` (the targets' names). Built with the `fuzzing` feature (scripts/test-all.sh, scripts/fuzz.sh).

use std::path::{Path, PathBuf};
use umq::fuzzing::{TARGETS, inputs, replay, seeds, target};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    match args.first().map(String::as_str) {
        Some("--write-seeds") => write_seeds(&root),
        Some("--list") => TARGETS.iter().for_each(|t| println!("{}", t.name)),
        Some(name) => {
            let Some(t) = target(name) else {
                eprintln!("no target {name}");
                std::process::exit(2);
            };
            let files: Vec<PathBuf> = match args.len() {
                1 => inputs(&root, t),
                _ => args[1..].iter().map(PathBuf::from).collect(),
            };
            replay(t, &files);
            println!("{}: {} inputs replayed", t.name, files.len());
        }
        None => {
            let names: Vec<_> = TARGETS.iter().map(|t| t.name).collect();
            eprintln!(
                "usage: fuzz_replay <{}> [files...] | --write-seeds",
                names.join("|")
            );
            std::process::exit(2);
        }
    }
}

fn write_seeds(root: &Path) {
    for t in TARGETS {
        let dir = root.join("corpus").join(t.name);
        std::fs::create_dir_all(&dir).unwrap();
        if std::fs::read_dir(&dir).unwrap().next().is_some() {
            continue;
        }
        for (i, s) in seeds(t).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
        }
        println!("{}: seeds written", t.name);
    }
}

//! `umq-fuzz <target>`: one of `umq::fuzzing::TARGETS` under AFL++ (persistent mode, input on
//! stdin); `umq-fuzz --list` names them. See scripts/fuzz.sh for how the test command and a campaign run it.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    if name == "--list" {
        umq::fuzzing::TARGETS.iter().for_each(|t| println!("{}", t.name));
        return;
    }
    let Some(target) = umq::fuzzing::target(&name) else {
        let names: Vec<_> = umq::fuzzing::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("usage: umq-fuzz <target>; targets: {}", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| (target.run)(data));
}

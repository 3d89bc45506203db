//! What the tools share: the two options every one of them has besides its own, `--man` (its
//! man page, written from the same clap definition as `--help`, so the two never disagree) and
//! `--completions SHELL`.

use clap::Command;
use clap_complete::Shell;

/// Serves `--man` or `--completions` when one was given: prints the page (roff, section 1) or
/// the shell's completion script to stdout, and says so. The tool then has nothing else to do.
pub fn print_man_or_completions(cmd: Command, man: bool, completions: Option<Shell>) -> bool {
    let mut out = std::io::stdout();
    if man {
        clap_mangen::Man::new(cmd)
            .section("1")
            .render(&mut out)
            .expect("stdout");
        return true;
    }
    if let Some(shell) = completions {
        let mut cmd = cmd;
        let name = cmd.get_name().to_string();
        clap_complete::generate(shell, &mut cmd, name, &mut out);
        return true;
    }
    false
}

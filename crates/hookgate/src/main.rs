use clap::Parser;

fn main() {
    let cli = hookgate::cli::Cli::parse();
    match hookgate::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}

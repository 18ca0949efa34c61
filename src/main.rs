fn main() {
    std::process::exit(pimdes::cli::main());
}

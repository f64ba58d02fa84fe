//! Quick timing of the BFV operations: `cargo run -p secinfer-he --release --example he_ops [set]`.
fn main() -> Result<(), secinfer_he::HeError> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "n4096".into());
    let p = secinfer_he::Params::by_name(&name)?;
    for o in secinfer_he::bench::he_ops(&p, 200)? {
        println!(
            "{name:8} {:40} {:10.2} us wall {:10.2} us cpu",
            o.op, o.micros, o.cpu_micros
        );
    }
    Ok(())
}

use secinfer_gc::activation::{ActSpec, Func};
use secinfer_gc::shares::{share_circuit, ShareDomain};
fn main() {
    let c = share_circuit(ShareDomain::Pow2(16), &ActSpec::default_for(Func::Tanh, 16)).expect("c");
    println!("{:?} gates {}", c.stats(), c.gates.len());
}

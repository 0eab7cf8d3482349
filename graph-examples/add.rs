//! The classic first program: `[1, 2, 3] + [4, 5, 6]` under a `gpu:0` scope, with the second
//! operand fed at run time (an add of two constants would be folded on the host when the plan
//! is compiled, and no kernel would run).
//!
//! Soft placement is on, so on a machine without a GPU the add falls back to `cpu:0`
//! (and says so). Run with `RUST_LOG=wgflow=info` to see placement decisions.

use wgflow::{DType, Graph, HostTensor, Session, SessionOptions};

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    println!("devices:");
    for d in wgflow::devices() {
        println!("  {d}");
    }

    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0, 3.0])?;
    let b = g.placeholder("b", [3], DType::F32)?;
    let c = g.device("gpu:0", |g| g.add(a, b))?;

    let options = SessionOptions {
        soft_placement: true,
        log_device_placement: true,
        ..Default::default()
    };
    let mut session = Session::new(&g, options)?;
    let plan = session.plan(&[c])?;
    let ran_on = plan
        .device_of(g.name(c)?)
        .map(|d| d.to_string())
        .unwrap_or_default();
    let out = session.run(&[(b, HostTensor::from([4.0f32, 5.0, 6.0]))], &[c])?;
    println!(
        "{} ran on {ran_on} as {} kernel(s)",
        g.name(c)?,
        plan.dispatch_count()
    );
    println!("{}", out[0]);
    Ok(())
}

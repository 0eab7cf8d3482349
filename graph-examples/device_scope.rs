//! TensorFlow's nested `with tf.device(...)` scopes and `log_device_placement=True`:
//! the innermost scope wins, unscoped constants sit with their first consumer, and every
//! node's device is logged when the plan is compiled. Soft placement moves nodes whose
//! device is not there (e.g. `gpu:1` on a machine with one GPU, or any GPU on none) to the
//! default device, with a warning.

use wgflow::{Graph, Session, SessionOptions};

fn main() -> wgflow::Result<()> {
    // Placement is logged at info level under the target `wgflow::placement`.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("wgflow=info"))
        .init();

    let mut g = Graph::new();
    let a = g.constant([[1.0f32, 2.0], [3.0, 4.0]])?;
    let b = g.constant([[1.0f32, 1.0], [0.0, 1.0]])?;
    let out = g.device("/GPU:0", |g| {
        let c = g.matmul(a, b)?; // gpu:0
        let d = g.device("/device:CPU:0", |g| g.sum(c, 1, false))?; // innermost scope: cpu:0
        let e = g.device("gpu:1", |g| g.exp(c))?; // gpu:1, if there is one
        let f = g.name_scope("head", |g| g.tanh(e))?; // gpu:0 again
        Ok([c, d, e, f])
    })?;

    let options = SessionOptions {
        soft_placement: true,
        log_device_placement: true,
        ..Default::default()
    };
    let mut session = Session::new(&g, options)?;
    let plan = session.plan(&out)?;
    for &t in &out {
        println!(
            "{:>10} on {}",
            g.name(t)?,
            plan.device_of(g.name(t)?)
                .map(|d| d.to_string())
                .unwrap_or_default()
        );
    }
    let values = session.run(&[], &out)?;
    for (t, v) in out.iter().zip(&values) {
        println!("{} = {v}", g.name(*t)?);
    }
    Ok(())
}

//! PyTorch's `device = 'cuda' if torch.cuda.is_available() else 'cpu'` in wgflow:
//! [`Device::best()`] is the first visible hardware GPU (discrete > integrated > virtual),
//! else `cpu:0`; software adapters (lavapipe, llvmpipe, WARP) rank below `cpu:0`, which is
//! faster on the same cores. The graph is built under that device's scope and runs there.

use wgflow::{Device, Graph, Session, SessionOptions};

fn main() -> wgflow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    let device = Device::best();
    println!("using {device}");

    let mut g = Graph::new();
    let (x, y) = g.device(&device.to_string(), |g| {
        let x = g.placeholder("x", [2, 3], wgflow::DType::F32)?;
        let w = g.constant([[0.5f32, -1.0], [2.0, 0.25], [-0.5, 1.0]])?;
        let h = g.matmul(x, w)?;
        let y = g.softmax(h, -1)?;
        Ok((x, y))
    })?;

    let mut session = Session::new(&g, SessionOptions::default())?;
    let input = wgflow::HostTensor::new([2, 3], vec![1.0f32, 2.0, 3.0, -1.0, 0.0, 1.0])?;
    let out = session.run(&[(x, input)], &[y])?;
    let plan = session.plan(&[y])?;
    println!(
        "softmax(x @ w) on {}:",
        plan.device_of(g.name(y)?)
            .map(|d| d.to_string())
            .unwrap_or_default()
    );
    println!("{}", out[0]);
    Ok(())
}

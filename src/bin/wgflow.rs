//! The wgflow command-line tool.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "wgflow",
    version,
    about = "Static dataflow graphs of tensor ops on WebGPU (wgpu) and the CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every physical device (each wgpu adapter as gpu:N, then cpu:0), best first.
    Devices {
        /// Show only the devices visible under WGFLOW_VISIBLE_DEVICES.
        #[arg(long)]
        visible: bool,
    },
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Devices { visible } => devices(visible),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wgflow: {e}");
            ExitCode::FAILURE
        }
    }
}

fn devices(visible: bool) -> wgflow::Result<()> {
    let list = if visible {
        wgflow::visible_devices()?
    } else {
        wgflow::devices()
    };
    println!(
        "{:<7} {:<34} {:<7} {:<10} {:>14} {:>14} {:>6} {:>6}",
        "device", "name", "backend", "type", "max_buffer", "max_binding", "align", "bufs"
    );
    for d in &list {
        println!(
            "{:<7} {:<34} {:<7} {:<10} {:>14} {:>14} {:>6} {:>6}",
            d.device.to_string(),
            truncate(&d.name, 34),
            d.backend,
            d.device_type,
            limit(d.limits.max_buffer_size),
            limit(d.limits.max_storage_buffer_binding_size),
            d.limits.min_storage_buffer_offset_alignment,
            limit(d.limits.max_storage_buffers_per_shader_stage as u64),
        );
    }
    println!("best: {}", wgflow::Device::best());
    Ok(())
}

fn limit(x: u64) -> String {
    if x >= u32::MAX as u64 * 2 || x == u32::MAX as u64 {
        "-".into()
    } else {
        x.to_string()
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

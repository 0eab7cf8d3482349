//! Resolve each kept node's device: explicit scope > colocation > the default device.

use super::Target;
use crate::device::{Device, DeviceSpec};
use crate::graph::Graph;
use crate::graph::NodeId;
use crate::{Error, Result};
use std::collections::HashMap;

/// The kept nodes with their devices.
#[derive(Debug, Clone)]
pub struct Placed {
    pub nodes: Vec<NodeId>,
    pub device: HashMap<NodeId, Device>,
}

/// Place every node of `kept` (graph order).
///
/// - A node built in a device scope goes there. A scope naming a device that is not visible
///   is an error naming the node and the visible devices, unless soft placement is on, in
///   which case the node goes to the default device and a warning is logged.
/// - An unscoped constant or placeholder is colocated with its first consumer, so feeding or
///   baking a value never costs a transfer by itself; an unscoped reshape (a view) stays
///   with its input.
/// - An unscoped variable goes to the default device (never to a consumer's, which differs
///   between plans); an assignment runs on its variable's device whatever its scope.
/// - Any other unscoped node goes to the default device, except a GPU-only op (a raw WGSL
///   kernel) when the session picked `cpu:0` over software adapters: it goes to the first
///   visible GPU.
pub fn place(graph: &Graph, kept: &[NodeId], target: &Target) -> Result<Placed> {
    let mut device = HashMap::new();
    let mut fallbacks: Vec<(DeviceSpec, Vec<String>)> = Vec::new();
    let mut deferred = Vec::new();
    let mut f16_moved: Vec<(Device, String)> = Vec::new();
    for &n in kept {
        let node = &graph.g[n];
        let d = match node.device {
            // An assignment writes its variable's storage, so it runs where the variable is.
            _ if node.op.is_assignment() => {
                let var = graph.input_nodes(n)[0];
                device.get(&var).copied().unwrap_or(target.default_device)
            }
            Some(spec) => match resolve(graph, n, spec, target)? {
                Some(d) => d,
                None => {
                    match fallbacks.iter_mut().find(|(s, _)| *s == spec) {
                        Some((_, names)) => names.push(node.name.clone()),
                        None => fallbacks.push((spec, vec![node.name.clone()])),
                    }
                    target.default_device
                }
            },
            // Every plan of a session must find a variable on the same device.
            None if node.op.is_variable() => target.default_device,
            None if node.op.is_leaf() => {
                deferred.push(n);
                continue;
            }
            None if node.op.is_view() => {
                let input = graph.input_nodes(n)[0];
                match device.get(&input) {
                    Some(&d) => d,
                    None => target.default_device,
                }
            }
            None => target.default_device,
        };
        let d = gpu_only(graph, n, d, target)?;
        let d = needs_f16(graph, n, d, target, &mut f16_moved)?;
        device.insert(n, d);
    }
    for n in deferred {
        let consumer = kept
            .iter()
            .filter(|&&c| c > n && graph.input_nodes(c).contains(&n))
            .find_map(|c| device.get(c).copied());
        let d = needs_f16(
            graph,
            n,
            consumer.unwrap_or(target.default_device),
            target,
            &mut f16_moved,
        )?;
        device.insert(n, d);
    }
    let available = || {
        target
            .devices
            .iter()
            .map(|(d, _)| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // One line per device, not per node.
    let mut lacking: Vec<Device> = f16_moved.iter().map(|(d, _)| *d).collect();
    lacking.sort();
    lacking.dedup();
    for d in lacking {
        let names: Vec<&str> = f16_moved
            .iter()
            .filter(|(x, _)| *x == d)
            .map(|(_, n)| n.as_str())
            .collect();
        log::warn!(
            "soft placement: {d} lacks the shader-f16 feature; {} node(s) that use f16 placed on cpu:0: {}",
            names.len(),
            names.join(", ")
        );
    }
    for (spec, names) in fallbacks {
        log::warn!(
            "soft placement: {spec} is not available ({}); {} node(s) placed on {} instead: {}",
            available(),
            names.len(),
            target.default_device,
            names.join(", ")
        );
    }
    Ok(Placed {
        nodes: kept.to_vec(),
        device,
    })
}

/// The device `spec` names, `None` when soft placement should fall back, or an error.
fn resolve(graph: &Graph, n: NodeId, spec: DeviceSpec, target: &Target) -> Result<Option<Device>> {
    let visible: Vec<Device> = target.devices.iter().map(|(d, _)| *d).collect();
    let found = match spec {
        DeviceSpec::Cpu => Some(Device::Cpu),
        DeviceSpec::Gpu(Some(i)) => visible.iter().copied().find(|&d| d == Device::Gpu(i)),
        DeviceSpec::Gpu(None) => visible.iter().copied().find(|d| d.is_gpu()),
    };
    if found.is_some() || target.soft_placement {
        return Ok(found);
    }
    let node = &graph.g[n];
    let available = visible
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    Err(Error::Placement {
        node: node.name.clone(),
        op: node.op.name().into(),
        requested: spec.to_string(),
        message: format!(
            "no such device is visible (built at {}); available: {available}. Enable soft placement to fall back",
            node.built_at()
        ),
    })
}

/// A node that produces or reads f16 headed for a GPU without the `shader-f16` feature moves to
/// `cpu:0` with soft placement on (logged); otherwise it is an error naming the feature.
fn needs_f16(
    graph: &Graph,
    n: NodeId,
    d: Device,
    target: &Target,
    moved: &mut Vec<(Device, String)>,
) -> Result<Device> {
    let node = &graph.g[n];
    let f16 = crate::DType::F16;
    let touches_f16 = node.dtype == f16
        || graph
            .input_nodes(n)
            .iter()
            .any(|&i| graph.g[i].dtype == f16);
    if !touches_f16 || target.limits(d).is_none_or(|l| l.shader_f16) {
        return Ok(d);
    }
    if target.soft_placement {
        moved.push((d, node.name.clone()));
        return Ok(Device::Cpu);
    }
    Err(Error::Placement {
        node: node.name.clone(),
        op: node.op.name().into(),
        requested: d.to_string(),
        message: format!(
            "f16 needs the adapter's shader-f16 feature, which {d} lacks (built at {}); place f16 work on cpu:0 or a GPU that has it (`wgflow devices` lists them), or enable soft placement",
            node.built_at()
        ),
    })
}

/// A GPU-only op (a raw WGSL kernel) headed for `cpu:0` moves to a GPU when it is unscoped and
/// the session chose `cpu:0` as its default over software adapters
/// ([`Target::gpu_only_default`]), or to the first visible GPU with soft placement on (logged);
/// otherwise, or with no GPU visible, it is an error.
fn gpu_only(graph: &Graph, n: NodeId, d: Device, target: &Target) -> Result<Device> {
    let node = &graph.g[n];
    if d.is_gpu() || !node.op.is_gpu_only() {
        return Ok(d);
    }
    let gpu = target.devices.iter().map(|(d, _)| *d).find(|d| d.is_gpu());
    match (gpu, target.gpu_only_default) {
        (_, Some(g)) if node.device.is_none() => {
            log::info!(
                "node '{}' ({}) runs only on a GPU; placed on {g}, not on the default device {d}",
                node.name,
                node.op.name()
            );
            Ok(g)
        }
        (Some(g), _) if target.soft_placement => {
            log::warn!(
                "soft placement: node '{}' ({}) runs only on a GPU; placed on {g} instead of {d}",
                node.name,
                node.op.name()
            );
            Ok(g)
        }
        _ => Err(Error::Placement {
            node: node.name.clone(),
            op: node.op.name().into(),
            requested: d.to_string(),
            message: format!(
                "a raw WGSL kernel runs only on a GPU (built at {}); {}",
                node.built_at(),
                if gpu.is_some() {
                    "place it on a GPU or enable soft placement"
                } else {
                    "no GPU is visible"
                }
            ),
        }),
    }
}

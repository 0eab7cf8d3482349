//! Optimizers as train ops: SGD (plain, momentum, Nesterov), Adam (plain, L2 weight decay)
//! and AdamW against PyTorch's update formulas evaluated here in float64, over several steps
//! on every device; learning rates fed at run time; fusion and resource bounds; errors.

use crate::common::{gpus, session_on};
use wgflow::train::{Adam, LearningRate, Optimizer, Sgd};
use wgflow::{DType, Device, Graph, HostTensor, Initializer, Session, Tensor};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_vec::<f32>().expect("f32")
}

/// The update rules, written out from PyTorch's documentation in float64.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Sgd {
        mu: f64,
        nesterov: bool,
    },
    Adam {
        b1: f64,
        b2: f64,
        eps: f64,
        wd: f64,
        decoupled: bool,
    },
}

/// One variable's state in float64: weight, momentum buffer / first moment, second moment.
#[derive(Debug, Clone)]
struct Ref {
    w: Vec<f64>,
    m: Vec<f64>,
    v: Vec<f64>,
}

impl Ref {
    fn new(w: &[f32]) -> Ref {
        let w: Vec<f64> = w.iter().map(|&x| f64::from(x)).collect();
        let n = w.len();
        Ref {
            w,
            m: vec![0.0; n],
            v: vec![0.0; n],
        }
    }

    /// Step `t` (1-based) with learning rate `lr` on the loss `sum(w·c) + sum(w·w)`.
    fn step(&mut self, rule: Rule, lr: f64, t: i32, c: &[f64]) {
        for (i, &c) in c.iter().enumerate() {
            let w = self.w[i];
            let mut g = c + 2.0 * w;
            match rule {
                Rule::Sgd { mu, nesterov } => {
                    let d = if mu == 0.0 {
                        g
                    } else {
                        self.m[i] = mu * self.m[i] + g;
                        if nesterov {
                            g + mu * self.m[i]
                        } else {
                            self.m[i]
                        }
                    };
                    self.w[i] = w - lr * d;
                }
                Rule::Adam {
                    b1,
                    b2,
                    eps,
                    wd,
                    decoupled,
                } => {
                    let mut base = w;
                    if decoupled {
                        base = w * (1.0 - lr * wd);
                    } else {
                        g += wd * w;
                    }
                    self.m[i] = b1 * self.m[i] + (1.0 - b1) * g;
                    self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g;
                    let m_hat = self.m[i] / (1.0 - b1.powi(t));
                    let v_hat = self.v[i] / (1.0 - b2.powi(t));
                    self.w[i] = base - lr * m_hat / (v_hat.sqrt() + eps);
                }
            }
        }
    }
}

/// Current values of `vars`, fetched by a run. (`Session::read_variable` maps its read-back
/// buffer with a non-blocking check that loses a race when tests poll one GPU from several
/// threads; a run's read-back waits for its callback.)
fn values(s: &mut Session, vars: &[Tensor]) -> Vec<Vec<f32>> {
    s.run(&[], vars).unwrap().iter().map(f32s).collect()
}

fn assert_near(what: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let tol = 2e-6 + 1e-5 * b.abs();
        assert!(
            (f64::from(a) - b).abs() <= tol,
            "{what}: element {i}: got {a}, want {b}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Variables of several shapes (a matrix, a vector, a one-element vector) with their
/// constants `c`, and the loss `Σ_k sum(w_k·c_k) + sum(w_k·w_k)` (gradient `c + 2w`).
struct Problem {
    g: Graph,
    vars: Vec<Tensor>,
    init: Vec<Vec<f32>>,
    cs: Vec<Vec<f64>>,
    loss: Tensor,
}

fn problem() -> Problem {
    let mut g = Graph::new();
    let shapes: [&[usize]; 3] = [&[2, 3], &[4], &[1]];
    let (mut vars, mut init, mut cs, mut terms) = (vec![], vec![], vec![], vec![]);
    for (k, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        // Gradients stay far from 0, where Adam's m̂/√v̂ would be ill-conditioned.
        let w0: Vec<f32> = (0..n).map(|i| 0.5 + 0.25 * (i + k) as f32).collect();
        let c: Vec<f32> = (0..n)
            .map(|i| 1.0 + 0.5 * ((i * 7 + k) % 5) as f32)
            .collect();
        let w = g
            .variable(
                &format!("w{k}"),
                HostTensor::new(shape.to_vec(), w0.clone()).unwrap(),
            )
            .unwrap();
        let cc = g
            .constant(HostTensor::new(shape.to_vec(), c.clone()).unwrap())
            .unwrap();
        let wc = g.mul(w, cc).unwrap();
        let ww = g.mul(w, w).unwrap();
        let axes: Vec<isize> = (0..shape.len() as isize).collect();
        let a = g.sum(wc, axes.clone(), false).unwrap();
        let b = g.sum(ww, axes, false).unwrap();
        terms.push(g.add(a, b).unwrap());
        vars.push(w);
        init.push(w0);
        cs.push(c.iter().map(|&x| f64::from(x)).collect());
    }
    let mut loss = terms[0];
    for &t in &terms[1..] {
        loss = g.add(loss, t).unwrap();
    }
    Problem {
        g,
        vars,
        init,
        cs,
        loss,
    }
}

/// Run `steps` steps of `opt` (whose rule is `rule`) on every device, comparing every
/// variable (and the moments, for `slots`) with the float64 reference after each step.
fn check_steps(what: &str, opt: &dyn Optimizer, rule: Rule, lr: f64, steps: i32, slots: &[&str]) {
    let mut p = problem();
    let train = opt.minimize(&mut p.g, p.loss, &p.vars).unwrap();
    let slot_vars: Vec<Vec<Tensor>> = p
        .vars
        .iter()
        .map(|&w| {
            let name = p.g.name(w).unwrap().to_string();
            slots
                .iter()
                .map(|s| p.g.tensor(&format!("{name}/{s}")).expect("slot variable"))
                .collect()
        })
        .collect();
    for d in devices() {
        let mut s = session_on(&p.g, d);
        let mut refs: Vec<Ref> = p.init.iter().map(|w| Ref::new(w)).collect();
        for t in 1..=steps {
            s.run_targets(&[], &[train]).unwrap();
            let ws = values(&mut s, &p.vars);
            for (k, r) in refs.iter_mut().enumerate() {
                r.step(rule, lr, t, &p.cs[k]);
                assert_near(&format!("{what} on {d}: w{k} after step {t}"), &ws[k], &r.w);
                if slots.is_empty() {
                    continue;
                }
                let got = values(&mut s, &slot_vars[k]);
                for (slot, got) in slots.iter().zip(&got) {
                    let want = if slot.ends_with("/v") { &r.v } else { &r.m };
                    assert_near(
                        &format!("{what} on {d}: w{k}/{slot} after step {t}"),
                        got,
                        want,
                    );
                }
            }
        }
    }
}

#[test]
fn sgd_plain_momentum_and_nesterov_follow_pytorch() {
    let rule = |mu: f32, nesterov| Rule::Sgd {
        mu: f64::from(mu),
        nesterov,
    };
    check_steps(
        "sgd",
        &Sgd::new(0.05),
        rule(0.0, false),
        0.05f32.into(),
        3,
        &[],
    );
    check_steps(
        "momentum",
        &Sgd::momentum(0.05, 0.9),
        rule(0.9, false),
        0.05f32.into(),
        4,
        &["SGD/momentum"],
    );
    check_steps(
        "nesterov",
        &Sgd::nesterov(0.05, 0.8),
        rule(0.8, true),
        0.05f32.into(),
        4,
        &["SGD/momentum"],
    );
}

#[test]
fn adam_with_bias_correction_follows_pytorch() {
    let adam = Adam::new(0.1);
    let rule = Rule::Adam {
        b1: 0.9f32.into(),
        b2: 0.999f32.into(),
        eps: 1e-8f32.into(),
        wd: 0.0,
        decoupled: false,
    };
    check_steps("adam", &adam, rule, 0.1f32.into(), 4, &["Adam/m", "Adam/v"]);
    // Other betas, a large epsilon (so it matters) and L2 weight decay on the gradient.
    let adam = Adam {
        beta1: 0.5,
        beta2: 0.75,
        epsilon: 0.5,
        weight_decay: 0.2,
        ..Adam::new(0.02)
    };
    let rule = Rule::Adam {
        b1: 0.5,
        b2: 0.75,
        eps: 0.5,
        wd: 0.2f32.into(),
        decoupled: false,
    };
    check_steps(
        "adam l2",
        &adam,
        rule,
        0.02f32.into(),
        5,
        &["Adam/m", "Adam/v"],
    );
}

#[test]
fn adamw_decays_the_weight_not_the_gradient() {
    let adamw = Adam::adamw(0.1, 0.25);
    let rule = Rule::Adam {
        b1: 0.9f32.into(),
        b2: 0.999f32.into(),
        eps: 1e-8f32.into(),
        wd: 0.25f32.into(),
        decoupled: true,
    };
    check_steps(
        "adamw",
        &adamw,
        rule,
        0.1f32.into(),
        4,
        &["AdamW/m", "AdamW/v"],
    );
}

#[test]
fn adam_counts_its_steps_in_one_variable() {
    let mut p = problem();
    let train = Adam::new(0.1).minimize(&mut p.g, p.loss, &p.vars).unwrap();
    let t = p.g.tensor("Adam/t").expect("the step counter");
    let mut s = session_on(&p.g, Device::Cpu);
    for k in 1..=3 {
        s.run_targets(&[], &[train]).unwrap();
        assert_eq!(s.read_variable(t).unwrap().item::<f32>().unwrap(), k as f32);
    }
}

#[test]
fn a_fed_learning_rate_changes_between_runs() {
    let lrs = [0.1f32, 0.3, 0.0, 0.05];
    for adam in [false, true] {
        let mut p = problem();
        let lr = p.g.placeholder("lr", [], DType::F32).unwrap();
        let opt: Box<dyn Optimizer> = if adam {
            Box::new(Adam::new(LearningRate::Tensor(lr)))
        } else {
            Box::new(Sgd::momentum(lr, 0.5))
        };
        let rule = if adam {
            Rule::Adam {
                b1: 0.9f32.into(),
                b2: 0.999f32.into(),
                eps: 1e-8f32.into(),
                wd: 0.0,
                decoupled: false,
            }
        } else {
            Rule::Sgd {
                mu: 0.5,
                nesterov: false,
            }
        };
        let train = opt.minimize(&mut p.g, p.loss, &p.vars).unwrap();
        for d in devices() {
            let mut s = session_on(&p.g, d);
            let mut refs: Vec<Ref> = p.init.iter().map(|w| Ref::new(w)).collect();
            for (t, &rate) in lrs.iter().enumerate() {
                s.run_targets(&[(lr, HostTensor::scalar(rate))], &[train])
                    .unwrap();
                let ws = values(&mut s, &p.vars);
                for (k, r) in refs.iter_mut().enumerate() {
                    r.step(rule, rate.into(), t as i32 + 1, &p.cs[k]);
                    assert_near(
                        &format!("adam {adam} on {d}: lr {rate}, w{k}"),
                        &ws[k],
                        &r.w,
                    );
                }
            }
        }
    }
}

#[test]
fn a_learning_rate_variable_drives_a_schedule() {
    let mut p = problem();
    let lr = p.g.variable("lr", 0.2f32).unwrap();
    let train = Sgd::new(lr).minimize(&mut p.g, p.loss, &p.vars).unwrap();
    let half = p.g.constant(0.5f32).unwrap();
    let decayed = p.g.mul(lr, half).unwrap();
    let decay = p.g.assign(lr, decayed).unwrap();
    let step = p.g.group(&[train, decay]).unwrap();
    for d in devices() {
        let mut s = session_on(&p.g, d);
        let mut refs: Vec<Ref> = p.init.iter().map(|w| Ref::new(w)).collect();
        for t in 0..3 {
            s.run_targets(&[], &[step]).unwrap();
            let ws = values(&mut s, &p.vars);
            let rate = 0.2 * 0.5f64.powi(t);
            for (k, r) in refs.iter_mut().enumerate() {
                let rule = Rule::Sgd {
                    mu: 0.0,
                    nesterov: false,
                };
                // The run reads the rate at its start, then halves it.
                r.step(rule, f64::from(rate as f32), t + 1, &p.cs[k]);
                assert_near(&format!("{d}: step {t}, w{k}"), &ws[k], &r.w);
            }
        }
    }
}

#[test]
fn each_assigned_variable_updates_in_one_kernel_and_reruns_create_nothing() {
    for (what, opt, assigned) in [
        ("sgd", Box::new(Sgd::new(0.1)) as Box<dyn Optimizer>, 3),
        ("momentum", Box::new(Sgd::nesterov(0.1, 0.9)), 6),
        ("adamw", Box::new(Adam::adamw(0.1, 0.01)), 10),
    ] {
        let mut p = problem();
        let train = opt.minimize(&mut p.g, p.loss, &p.vars).unwrap();
        for d in devices() {
            let mut s = session_on(&p.g, d);
            let plan = s.plan(&[train]).unwrap();
            assert_eq!(plan.assigns.len(), assigned, "{what}");
            // One kernel per assigned variable (Adam's bias corrections are inlined into the
            // weights' kernels), plus the gradients c + 2w.
            // A gradient read by two updates (the momentum and the weight) is one kernel of
            // its own; plain SGD's fuses into the weight's update.
            let gradients = if what == "sgd" { 0 } else { p.vars.len() };
            let bound = assigned + gradients;
            assert!(
                plan.dispatch_count() <= bound,
                "{what} on {d}: {} dispatches for {assigned} assigned variables\n{}",
                plan.dispatch_count(),
                plan.describe()
            );
            s.run_targets(&[], &[train]).unwrap();
            let before = s.counters();
            s.run_targets(&[], &[train]).unwrap();
            let after = s.counters();
            assert_eq!(
                before.buffers_created, after.buffers_created,
                "{what} on {d}"
            );
            assert_eq!(
                before.pipelines_created, after.pipelines_created,
                "{what} on {d}"
            );
            assert_eq!(
                before.bind_groups_created, after.bind_groups_created,
                "{what} on {d}"
            );
            assert_eq!(before.plans_compiled, after.plans_compiled, "{what} on {d}");
        }
    }
}

#[test]
fn slots_live_on_the_variables_device() {
    for d in gpus() {
        let mut g = Graph::new();
        let spec = d.to_string();
        let w = g
            .device(&spec, |g| g.variable("w", HostTensor::from([1.0f32, 2.0])))
            .unwrap();
        let ww = g.mul(w, w).unwrap();
        let loss = g.sum(ww, [0], false).unwrap();
        let train = Adam::new(0.1).minimize(&mut g, loss, &[w]).unwrap();
        let mut s = session_on(&g, Device::Cpu);
        let plan = s.plan(&[train]).unwrap();
        for name in ["w", "w/Adam/m", "w/Adam/v", "Adam/t"] {
            assert_eq!(plan.device_of(name), Some(d), "{name}\n{}", plan.describe());
        }
        s.run_targets(&[], &[train]).unwrap();
        // First Adam step: m̂ = g, v̂ = g², so w -= lr·g/(|g| + ε) = 0.1.
        let got = values(&mut s, &[w]);
        assert_near(&format!("{d}"), &got[0], &[0.9, 1.9]);
    }
}

fn err_text(r: wgflow::Result<Tensor>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn bad_lists_and_settings_are_errors_that_name_the_problem() {
    let mut p = problem();
    let (w, loss) = (p.vars[0], p.loss);
    let g = &mut p.g;
    let c = g.constant([1.0f32, 2.0]).unwrap();
    let e = err_text(Sgd::new(0.1).minimize(g, loss, &[w, c]));
    assert!(e.contains("not a variable"), "{e}");

    let unused = g.variable("unused", HostTensor::from([1.0f32])).unwrap();
    let e = err_text(Adam::new(0.1).minimize(g, loss, &[w, unused]));
    assert!(e.contains("'unused'") && e.contains("no gradient"), "{e}");

    let counter = g.variable("steps", 0i32).unwrap();
    let e = err_text(Sgd::new(0.1).minimize(g, loss, &[counter]));
    assert!(
        e.contains("'steps'") && e.contains("i32") && e.contains("f32"),
        "{e}"
    );

    let e = err_text(Sgd::new(0.1).minimize(g, loss, &[w, w]));
    assert!(e.contains("listed twice"), "{e}");
    let e = err_text(Sgd::new(0.1).minimize(g, loss, &[]));
    assert!(e.contains("no variables"), "{e}");

    let vec_lr = g.placeholder("vec_lr", [2], DType::F32).unwrap();
    let e = err_text(Sgd::new(vec_lr).minimize(g, loss, &[w]));
    assert!(e.contains("scalar f32") && e.contains("'vec_lr'"), "{e}");
    let int_lr = g.placeholder("int_lr", [], DType::I32).unwrap();
    let e = err_text(Adam::new(int_lr).minimize(g, loss, &[w]));
    assert!(e.contains("scalar f32") && e.contains("i32"), "{e}");
    for bad in [-0.1f32, f32::NAN, f32::INFINITY] {
        let e = err_text(Sgd::new(bad).minimize(g, loss, &[w]));
        assert!(e.contains("learning rate"), "{bad}: {e}");
    }

    let e = err_text(Sgd::nesterov(0.1, 0.0).minimize(g, loss, &[w]));
    assert!(e.contains("Nesterov"), "{e}");
    let e = err_text(Sgd::momentum(0.1, -1.0).minimize(g, loss, &[w]));
    assert!(e.contains("momentum"), "{e}");
    for (beta1, beta2) in [(1.0, 0.9), (0.9, -0.5), (f32::NAN, 0.9)] {
        let opt = Adam {
            beta1,
            beta2,
            ..Adam::new(0.1)
        };
        let e = err_text(opt.minimize(g, loss, &[w]));
        assert!(e.contains("beta"), "{beta1} {beta2}: {e}");
    }
    let opt = Adam {
        epsilon: -1.0,
        ..Adam::new(0.1)
    };
    assert!(err_text(opt.minimize(g, loss, &[w])).contains("epsilon"));

    // apply_gradients: a gradient of the wrong shape.
    let e = err_text(Sgd::new(0.1).apply_gradients(g, &[(c, w)]));
    assert!(e.contains("gradient") && e.contains("'w0'"), "{e}");

    // A second optimizer with the same slot names needs another name.
    Adam::new(0.1).minimize(g, loss, &[w]).unwrap();
    let e = err_text(Adam::new(0.1).minimize(g, loss, &[w]));
    assert!(e.contains("already exists"), "{e}");
    let other = Adam {
        name: "Adam2".into(),
        ..Adam::new(0.1)
    };
    other.minimize(g, loss, &[w]).unwrap();
    assert!(g.tensor("w0/Adam2/m").is_some());
    // Errors leave no half-built optimizer behind that a session would choke on.
    let _: Session = session_on(g, Device::Cpu);
}

#[test]
fn slot_initializers_are_zeros() {
    let mut p = problem();
    Sgd::momentum(0.1, 0.9)
        .minimize(&mut p.g, p.loss, &p.vars)
        .unwrap();
    let b = p.g.tensor("w0/SGD/momentum").unwrap();
    let node = p.g.node(b).unwrap();
    assert_eq!(
        node.op,
        wgflow::ops::Op::Leaf(wgflow::ops::Leaf::Variable(Initializer::Zeros))
    );
    assert_eq!(node.shape.0, vec![2, 3]);
}

/// The issue-21 W6 step (batch 256, 784-512-512-10 with bias and relu, softmax
/// cross-entropy, Adam over all 6 parameters), planned on cpu:0: the kernels of the step
/// beyond those computing the loss's gradients stay at one per assigned variable (each
/// parameter's m, v and weight, and Adam's step count), so a change that splits an update
/// into several kernels fails here.
#[test]
fn adam_over_an_mlp_adds_one_kernel_per_assigned_variable() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [256, 784], DType::F32).unwrap();
    let y = g.placeholder("y", [256, 10], DType::F32).unwrap();
    let mut h = x;
    let mut vars = Vec::new();
    for (i, (k, n)) in [(784usize, 512usize), (512, 512), (512, 10)]
        .into_iter()
        .enumerate()
    {
        let w = g
            .variable_with(
                &format!("w{i}"),
                [k, n],
                DType::F32,
                Initializer::GlorotUniform { seed: i as u64 },
            )
            .unwrap();
        let b = g
            .variable_with(&format!("b{i}"), [n], DType::F32, Initializer::Zeros)
            .unwrap();
        vars.extend([w, b]);
        let a = g.linear(h, w, Some(b)).unwrap();
        h = if i < 2 { g.relu(a).unwrap() } else { a };
    }
    let logp = g.log_softmax(h, -1).unwrap();
    let picked = g.mul(logp, y).unwrap();
    let total = g.sum(picked, wgflow::Axes::All, false).unwrap();
    let scale = g.constant(-1.0f32 / 256.0).unwrap();
    let loss = g.mul(total, scale).unwrap();
    let grads: Vec<Tensor> = g
        .gradients(loss, &vars)
        .unwrap()
        .into_iter()
        .map(|d| d.expect("every parameter gets a gradient"))
        .collect();
    let train = Adam::new(1e-3).minimize(&mut g, loss, &vars).unwrap();
    let mut s = session_on(&g, Device::Cpu);
    let backward = s.plan(&grads).unwrap().dispatch_count();
    let plan = s.plan(&[train]).unwrap();
    let step = plan.dispatch_count();
    assert_eq!(plan.assigns.len(), 3 * vars.len() + 1);
    assert!(
        step <= backward + plan.assigns.len(),
        "the train step takes {step} kernels: {backward} for the gradients and {} for {} assigned variables\n{}",
        step - backward,
        plan.assigns.len(),
        plan.describe()
    );
}

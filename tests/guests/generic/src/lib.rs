//! A generic component: its own world `test:generic/calc`, built with plain
//! wit-bindgen and no skillhost SDK. The host's tests load it as a skill whose tools are
//! its exported functions, and check every WIT type through the JSON conversion.

// The generated bindings use `unsafe` and `export_name` for the canonical ABI.
#![allow(missing_docs, unsafe_code)]

wit_bindgen::generate!({ world: "calc", path: "wit" });

use exports::test::generic::shapes::{self, Drawing, ErrorInfo, GuestCounter, Point, Shape};

struct Calc;

impl Guest for Calc {
    fn add(a: u32, b: u32) -> u64 {
        u64::from(a) + u64::from(b)
    }

    fn greet(name: Option<String>) -> String {
        format!("hello, {}", name.as_deref().unwrap_or("world"))
    }
}

impl exports::stress::Guest for Calc {
    fn spin() {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn allocate(mebibytes: u32) -> u32 {
        let mut blocks = Vec::new();
        for _ in 0..mebibytes {
            blocks.push(std::hint::black_box(vec![1u8; 1 << 20]));
        }
        blocks.len() as u32
    }
}

impl exports::math_add::Guest for Calc {
    fn pairs() -> String {
        "never called: its tool name collides".into()
    }
}

impl exports::exports::Guest for Calc {
    fn init(_app_name: String, _symbols: exports::exports::Symbols, _stub_wasi: bool) -> Result<(), String> {
        // As in a component componentize-py built: the hook served the build, and calling
        // it afterwards traps.
        unreachable!("componentize-py's init runs only while the component is built")
    }
}

impl exports::math::Guest for Calc {
    fn add_pairs(pairs: Vec<(u32, u32)>) -> Vec<u64> {
        pairs.into_iter().map(|(a, b)| u64::from(a) + u64::from(b)).collect()
    }
}

impl shapes::Guest for Calc {
    type Counter = Counter;

    fn area(shape: Shape) -> f64 {
        match shape {
            Shape::Circle(r) => std::f64::consts::PI * r * r,
            Shape::Rectangle((w, h)) => w * h,
            Shape::Polygon(points) => {
                // The shoelace formula.
                let n = points.len();
                let twice: i64 = (0..n)
                    .map(|i| {
                        let (a, b) = (&points[i], &points[(i + 1) % n]);
                        i64::from(a.x) * i64::from(b.y) - i64::from(b.x) * i64::from(a.y)
                    })
                    .sum();
                twice.abs() as f64 / 2.0
            }
            Shape::Empty => 0.0,
        }
    }

    fn echo(drawing: Drawing) -> Drawing {
        drawing
    }

    fn midpoint(a: Point, b: Point) -> Point {
        Point { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 }
    }

    fn divide(a: f64, b: f64) -> Result<f64, String> {
        if b == 0.0 { Err(format!("cannot divide {a} by zero")) } else { Ok(a / b) }
    }

    fn check(fail: bool) -> Result<(), ErrorInfo> {
        if fail { Err(ErrorInfo { code: 7, message: "asked to fail".into() }) } else { Ok(()) }
    }

    fn connect(port: u16) -> Result<String, String> {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(_) => Ok("connected".into()),
            Err(e) => Err(format!("connect failed: {e}")),
        }
    }

    fn total(c: shapes::CounterBorrow<'_>) -> u32 {
        c.get::<Counter>().next()
    }
}

pub struct Counter(std::cell::Cell<u32>);

impl GuestCounter for Counter {
    fn new(start: u32) -> Self {
        Counter(std::cell::Cell::new(start))
    }

    fn next(&self) -> u32 {
        let n = self.0.get();
        self.0.set(n + 1);
        n
    }
}

export!(Calc);

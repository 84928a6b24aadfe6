//! Keeps the model's int8 weights int8 in memory.
//!
//! all-MiniLM-L6-v2-int8 stores each weight matrix as int8 with float scales (per column
//! for the matrix products, per row for the embedding tables) and dequantizes them in the
//! graph: `Mul(Cast(W_q), scales)`. ONNX Runtime folds those constants when it loads the
//! model, so the session holds every weight as float32 (90 MB for a 22 MB file, and
//! 157 MB resident after the load) and runs float matrix products. [`int8_weights`]
//! rewrites the graph before ONNX Runtime sees it:
//!
//! - `MatMul(x, Mul(Cast(W_q), s))` becomes `com.microsoft.DynamicQuantizeMatMul(x, W_q,
//!   s)` (`s` as a 1-D tensor): the weights stay int8 and the product is an integer one,
//!   `x` quantized per call;
//! - `Gather(Mul(Cast(W_q), s), ids)` becomes `Mul(Cast(Gather(W_q, ids)), s')`, with `s'`
//!   the scales themselves (per column) or their gathered rows (per row): only the rows
//!   looked up are dequantized.
//!
//! The dequantizing nodes and scale tensors nothing uses any more are dropped; every
//! other node, tensor and field is copied byte for byte. The protobuf is read and written
//! at the wire level here (no ONNX library), decoding only the fields the rewrite looks
//! at. A graph without the pattern, or with a node holding a subgraph (whose names this
//! rewrite does not follow), comes back as `None`: the model is then loaded as it is.

use std::collections::{HashMap, HashSet};

/// ONNX `TensorProto.DataType` values used here.
const FLOAT: u64 = 1;
const INT8: u64 = 3;

/// A model the rewrite could not read.
#[derive(Debug, thiserror::Error)]
#[error("the model is not a readable ONNX protobuf: {0}")]
pub struct ProtoError(&'static str);

/// What [`int8_weights`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewritten {
    /// Matrix products that now read int8 weights.
    pub matmuls: usize,
    /// Embedding lookups that now gather int8 rows.
    pub gathers: usize,
}

/// The model `onnx` with its int8 weights kept int8 (module doc), and what changed; `None`
/// when nothing matched (load `onnx` as it is).
pub fn int8_weights(onnx: &[u8]) -> Result<Option<(Vec<u8>, Rewritten)>, ProtoError> {
    let model = fields(onnx)?;
    let Some(graph) = model.iter().find(|f| f.number == MODEL_GRAPH) else { return Ok(None) };
    let Some((graph, rewritten)) = rewrite_graph(graph.bytes()?)? else { return Ok(None) };
    let mut out = Vec::with_capacity(onnx.len() + 4096);
    let mut has_ms = false;
    for field in &model {
        if field.number == MODEL_OPSET {
            has_ms |= fields(field.bytes()?)?.iter().any(|f| f.number == 1 && f.bytes().ok() == Some(MS_DOMAIN.as_bytes()));
        }
        if field.number == MODEL_GRAPH {
            put_bytes(&mut out, MODEL_GRAPH, &graph);
        } else {
            out.extend_from_slice(field.raw);
        }
    }
    if !has_ms {
        let mut opset = Vec::new();
        put_bytes(&mut opset, 1, MS_DOMAIN.as_bytes());
        put_varint_field(&mut opset, 2, 1);
        put_bytes(&mut out, MODEL_OPSET, &opset);
    }
    Ok(Some((out, rewritten)))
}

/// ONNX Runtime's domain of contrib operators.
const MS_DOMAIN: &str = "com.microsoft";

// Field numbers of onnx.proto.
const MODEL_GRAPH: u32 = 7;
const MODEL_OPSET: u32 = 8;
const GRAPH_NODE: u32 = 1;
const GRAPH_INITIALIZER: u32 = 5;
const GRAPH_INPUT: u32 = 11;
const GRAPH_OUTPUT: u32 = 12;
const NODE_INPUT: u32 = 1;
const NODE_OUTPUT: u32 = 2;
const NODE_NAME: u32 = 3;
const NODE_OP: u32 = 4;
const NODE_ATTRIBUTE: u32 = 5;
const NODE_DOMAIN: u32 = 7;
const ATTR_NAME: u32 = 1;
const ATTR_I: u32 = 3;
const ATTR_G: u32 = 6;
const ATTR_GRAPHS: u32 = 11;
const ATTR_TYPE: u32 = 20;
const ATTR_TYPE_INT: u64 = 2;
const TENSOR_DIMS: u32 = 1;
const TENSOR_TYPE: u32 = 2;
const TENSOR_FLOATS: u32 = 4;
const TENSOR_NAME: u32 = 8;
const TENSOR_RAW: u32 = 9;
const VALUE_INFO_NAME: u32 = 1;

/// One node of the graph, decoded as far as the rewrite needs.
struct Node<'a> {
    name: &'a str,
    op: &'a str,
    domain: &'a str,
    inputs: Vec<&'a str>,
    outputs: Vec<&'a str>,
    /// `(name, integer value)` of each attribute.
    attributes: Vec<(&'a str, Option<i64>)>,
    /// Whether an attribute holds a subgraph.
    subgraph: bool,
}

impl<'a> Node<'a> {
    fn read(field: &Field<'a>) -> Result<Self, ProtoError> {
        let mut node =
            Node { name: "", op: "", domain: "", inputs: Vec::new(), outputs: Vec::new(), attributes: Vec::new(), subgraph: false };
        for f in fields(field.bytes()?)? {
            match f.number {
                NODE_INPUT => node.inputs.push(f.str()?),
                NODE_OUTPUT => node.outputs.push(f.str()?),
                NODE_NAME => node.name = f.str()?,
                NODE_OP => node.op = f.str()?,
                NODE_DOMAIN => node.domain = f.str()?,
                NODE_ATTRIBUTE => {
                    let (mut name, mut value) = ("", None);
                    for a in fields(f.bytes()?)? {
                        match a.number {
                            ATTR_NAME => name = a.str()?,
                            ATTR_I => value = Some(a.varint()? as i64),
                            ATTR_G | ATTR_GRAPHS => node.subgraph = true,
                            _ => {}
                        }
                    }
                    node.attributes.push((name, value));
                }
                _ => {}
            }
        }
        Ok(node)
    }

    /// An operator of the default domain named `op`.
    fn is(&self, op: &str) -> bool {
        self.op == op && (self.domain.is_empty() || self.domain == "ai.onnx")
    }

    fn attribute(&self, name: &str) -> Option<i64> {
        self.attributes.iter().find(|(n, _)| *n == name).and_then(|(_, v)| *v)
    }
}

/// An initializer, decoded as far as the rewrite needs.
struct Tensor<'a> {
    name: &'a str,
    dims: Vec<u64>,
    data_type: u64,
    raw: Option<&'a [u8]>,
    /// `float_data`, as little-endian bytes.
    floats: Vec<u8>,
}

impl<'a> Tensor<'a> {
    fn read(field: &Field<'a>) -> Result<Self, ProtoError> {
        let mut tensor = Tensor { name: "", dims: Vec::new(), data_type: 0, raw: None, floats: Vec::new() };
        for f in fields(field.bytes()?)? {
            match (f.number, f.value) {
                (TENSOR_DIMS, Value::Varint(d)) => tensor.dims.push(d),
                (TENSOR_DIMS, Value::Bytes(packed)) => {
                    let mut at = 0;
                    while at < packed.len() {
                        tensor.dims.push(varint(packed, &mut at)?);
                    }
                }
                (TENSOR_TYPE, Value::Varint(t)) => tensor.data_type = t,
                (TENSOR_NAME, _) => tensor.name = f.str()?,
                (TENSOR_RAW, Value::Bytes(raw)) => tensor.raw = Some(raw),
                (TENSOR_FLOATS, Value::Bytes(packed)) => tensor.floats.extend_from_slice(packed),
                (TENSOR_FLOATS, Value::Fixed32(bits)) => tensor.floats.extend_from_slice(&bits.to_le_bytes()),
                _ => {}
            }
        }
        Ok(tensor)
    }

    fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// A float tensor's values as little-endian bytes, when they are all there.
    fn float_bytes(&self) -> Option<&[u8]> {
        let bytes = self.raw.unwrap_or(&self.floats);
        (self.data_type == FLOAT && bytes.len() as u64 == self.elements() * 4).then_some(bytes)
    }
}

/// The int8 weights and the float scales whose product `name` is, if `name` is the output
/// of `Mul(Cast(W_q, to = FLOAT), s)` over initializers.
fn dequantized<'a, 't>(
    name: &str,
    nodes: &[Node<'a>],
    producer: &HashMap<&str, usize>,
    tensors: &'t HashMap<&str, Tensor<'a>>,
) -> Option<(&'t Tensor<'a>, &'t Tensor<'a>)> {
    let mul = &nodes[*producer.get(name)?];
    if !mul.is("Mul") || mul.inputs.len() != 2 {
        return None;
    }
    let cast_at = mul.inputs.iter().position(|i| producer.contains_key(i))?;
    let cast = &nodes[producer[mul.inputs[cast_at]]];
    let scale = tensors.get(mul.inputs[1 - cast_at])?;
    if !cast.is("Cast") || cast.inputs.len() != 1 || cast.attribute("to") != Some(FLOAT as i64) {
        return None;
    }
    let weights = tensors.get(cast.inputs[0])?;
    let ok = weights.data_type == INT8 && weights.dims.len() == 2 && scale.float_bytes().is_some();
    ok.then_some((weights, scale))
}

/// The graph rewritten, or `None` when nothing matched.
fn rewrite_graph(graph: &[u8]) -> Result<Option<(Vec<u8>, Rewritten)>, ProtoError> {
    let graph = fields(graph)?;
    let nodes: Vec<Node> = graph.iter().filter(|f| f.number == GRAPH_NODE).map(Node::read).collect::<Result<_, _>>()?;
    if nodes.iter().any(|n| n.subgraph) {
        return Ok(None);
    }
    let tensors: HashMap<&str, Tensor> =
        graph.iter().filter(|f| f.number == GRAPH_INITIALIZER).map(|f| Tensor::read(f).map(|t| (t.name, t))).collect::<Result<_, _>>()?;
    let producer: HashMap<&str, usize> = nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |o| (*o, i))).collect();

    // Each node's replacement (encoded nodes), and the scale tensors added.
    let mut replaced: HashMap<usize, Vec<Vec<u8>>> = HashMap::new();
    let mut added: Vec<(String, Vec<u8>)> = Vec::new();
    let mut rewritten = Rewritten { matmuls: 0, gathers: 0 };
    for (i, node) in nodes.iter().enumerate() {
        if node.is("MatMul") && node.inputs.len() == 2 && node.outputs.len() == 1 {
            let Some((weights, scale)) = dequantized(node.inputs[1], &nodes, &producer, &tensors) else { continue };
            let columns = weights.dims[1];
            if scale.elements() != columns || scale.dims.iter().rev().skip(1).any(|&d| d != 1) {
                continue;
            }
            let per_column = format!("{}.per_column", scale.name);
            if !added.iter().any(|(name, _)| *name == per_column) {
                let bytes = scale.float_bytes().unwrap_or_default();
                added.push((per_column.clone(), float_tensor(&per_column, &[columns], bytes)));
            }
            let inputs = [node.inputs[0], weights.name, per_column.as_str()];
            replaced.insert(i, vec![encode_node(node.name, "DynamicQuantizeMatMul", MS_DOMAIN, &inputs, &node.outputs, None)]);
            rewritten.matmuls += 1;
        } else if node.is("Gather") && node.inputs.len() == 2 && node.outputs.len() == 1 && node.attribute("axis").unwrap_or(0) == 0 {
            let Some((weights, scale)) = dequantized(node.inputs[0], &nodes, &producer, &tensors) else { continue };
            let (rows, columns) = (weights.dims[0], weights.dims[1]);
            let per_row = scale.dims == [rows, 1];
            if !per_row && (scale.elements() != columns || scale.dims.iter().rev().skip(1).any(|&d| d != 1)) {
                continue;
            }
            let (ids, out) = (node.inputs[1], node.outputs[0]);
            let (gathered, as_float, rows_scale) = (format!("{out}.int8"), format!("{out}.float"), format!("{out}.scales"));
            let mut new = vec![encode_node(node.name, "Gather", "", &[weights.name, ids], &[gathered.as_str()], None)];
            let scales = if per_row {
                let name = format!("{}.scales", node.name);
                new.push(encode_node(&name, "Gather", "", &[scale.name, ids], &[rows_scale.as_str()], None));
                rows_scale.as_str()
            } else {
                scale.name
            };
            let (cast, mul) = (format!("{}.dequantize", node.name), format!("{}.scale", node.name));
            new.push(encode_node(&cast, "Cast", "", &[gathered.as_str()], &[as_float.as_str()], Some(("to", FLOAT as i64))));
            new.push(encode_node(&mul, "Mul", "", &[as_float.as_str(), scales], &[out], None));
            replaced.insert(i, new);
            rewritten.gathers += 1;
        }
    }
    if replaced.is_empty() {
        return Ok(None);
    }

    // Drop the nodes whose outputs nothing reads any more (the dequantizing ones), then the
    // initializers nothing reads.
    let graph_names = |number| -> Result<HashSet<&str>, ProtoError> {
        let mut names = HashSet::new();
        for f in graph.iter().filter(|f| f.number == number) {
            for v in fields(f.bytes()?)? {
                if v.number == VALUE_INFO_NAME {
                    names.insert(v.str()?);
                }
            }
        }
        Ok(names)
    };
    let (outputs, inputs) = (graph_names(GRAPH_OUTPUT)?, graph_names(GRAPH_INPUT)?);
    let reads = |i: usize| -> Vec<String> {
        match replaced.get(&i) {
            Some(new) => new.iter().flat_map(|raw| node_inputs(raw)).collect(),
            None => nodes[i].inputs.iter().map(|s| (*s).to_owned()).collect(),
        }
    };
    let mut alive = vec![true; nodes.len()];
    loop {
        let read: HashSet<String> = (0..nodes.len()).filter(|&i| alive[i]).flat_map(reads).collect();
        let mut changed = false;
        for (i, node) in nodes.iter().enumerate() {
            if alive[i] && !replaced.contains_key(&i) && !node.outputs.iter().any(|o| read.contains(*o) || outputs.contains(o)) {
                alive[i] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let read: HashSet<String> = (0..nodes.len()).filter(|&i| alive[i]).flat_map(reads).collect();

    let mut out = Vec::with_capacity(graph.iter().map(|f| f.raw.len()).sum());
    let (mut node_at, mut initializers_left) = (0, graph.iter().filter(|f| f.number == GRAPH_INITIALIZER).count());
    for field in &graph {
        match field.number {
            GRAPH_NODE => {
                match replaced.get(&node_at) {
                    Some(new) => new.iter().for_each(|raw| put_bytes(&mut out, GRAPH_NODE, raw)),
                    None if alive[node_at] => out.extend_from_slice(field.raw),
                    None => {}
                }
                node_at += 1;
            }
            GRAPH_INITIALIZER => {
                let name = Tensor::read(field)?.name;
                if read.contains(name) || inputs.contains(name) || outputs.contains(name) {
                    out.extend_from_slice(field.raw);
                }
                initializers_left -= 1;
                if initializers_left == 0 {
                    added.iter().for_each(|(_, raw)| put_bytes(&mut out, GRAPH_INITIALIZER, raw));
                }
            }
            _ => out.extend_from_slice(field.raw),
        }
    }
    Ok(Some((out, rewritten)))
}

/// The inputs of an encoded node.
fn node_inputs(raw: &[u8]) -> Vec<String> {
    let Ok(fields) = fields(raw) else { return Vec::new() };
    fields.iter().filter(|f| f.number == NODE_INPUT).filter_map(|f| f.str().ok().map(str::to_owned)).collect()
}

/// A `NodeProto`.
fn encode_node(name: &str, op: &str, domain: &str, inputs: &[&str], outputs: &[&str], int_attribute: Option<(&str, i64)>) -> Vec<u8> {
    let mut node = Vec::new();
    for input in inputs {
        put_bytes(&mut node, NODE_INPUT, input.as_bytes());
    }
    for output in outputs {
        put_bytes(&mut node, NODE_OUTPUT, output.as_bytes());
    }
    put_bytes(&mut node, NODE_NAME, name.as_bytes());
    put_bytes(&mut node, NODE_OP, op.as_bytes());
    if let Some((attribute, value)) = int_attribute {
        let mut a = Vec::new();
        put_bytes(&mut a, ATTR_NAME, attribute.as_bytes());
        put_varint_field(&mut a, ATTR_I, value as u64);
        put_varint_field(&mut a, ATTR_TYPE, ATTR_TYPE_INT);
        put_bytes(&mut node, NODE_ATTRIBUTE, &a);
    }
    if !domain.is_empty() {
        put_bytes(&mut node, NODE_DOMAIN, domain.as_bytes());
    }
    node
}

/// A float `TensorProto` of `dims` holding `bytes` (little-endian floats).
fn float_tensor(name: &str, dims: &[u64], bytes: &[u8]) -> Vec<u8> {
    let mut tensor = Vec::new();
    for &d in dims {
        put_varint_field(&mut tensor, TENSOR_DIMS, d);
    }
    put_varint_field(&mut tensor, TENSOR_TYPE, FLOAT);
    put_bytes(&mut tensor, TENSOR_NAME, name.as_bytes());
    put_bytes(&mut tensor, TENSOR_RAW, bytes);
    tensor
}

/// One field of a protobuf message as it was on the wire.
struct Field<'a> {
    number: u32,
    value: Value<'a>,
    /// The whole field, key included.
    raw: &'a [u8],
}

#[derive(Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Field<'a> {
    fn bytes(&self) -> Result<&'a [u8], ProtoError> {
        match self.value {
            Value::Bytes(b) => Ok(b),
            _ => Err(ProtoError("a message field is not length-delimited")),
        }
    }

    fn str(&self) -> Result<&'a str, ProtoError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| ProtoError("a string is not UTF-8"))
    }

    fn varint(&self) -> Result<u64, ProtoError> {
        match self.value {
            Value::Varint(v) => Ok(v),
            _ => Err(ProtoError("an integer field is not a varint")),
        }
    }
}

/// The fields of the message `buf`, in order.
fn fields(buf: &[u8]) -> Result<Vec<Field<'_>>, ProtoError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let start = at;
        let key = varint(buf, &mut at)?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtoError("a field number is too large"))?;
        let take = |at: &mut usize, n: usize| -> Result<&[u8], ProtoError> {
            let end = at.checked_add(n).filter(|&e| e <= buf.len()).ok_or(ProtoError("a field runs past the end"))?;
            let bytes = &buf[*at..end];
            *at = end;
            Ok(bytes)
        };
        let value = match key & 7 {
            0 => Value::Varint(varint(buf, &mut at)?),
            1 => {
                take(&mut at, 8)?;
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut at)?).map_err(|_| ProtoError("a length is too large"))?;
                Value::Bytes(take(&mut at, len)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(take(&mut at, 4)?.try_into().expect("four bytes"))),
            _ => return Err(ProtoError("an unsupported wire type")),
        };
        out.push(Field { number, value, raw: &buf[start..at] });
    }
    Ok(out)
}

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, ProtoError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at).ok_or(ProtoError("a varint runs past the end"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(ProtoError("a varint is too long"))
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_varint(out, u64::from(number) << 3);
    put_varint(out, value);
}

fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(number) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_info(name: &str) -> Vec<u8> {
        let mut v = Vec::new();
        put_bytes(&mut v, VALUE_INFO_NAME, name.as_bytes());
        v
    }

    fn int8_tensor(name: &str, dims: &[u64]) -> Vec<u8> {
        let mut t = Vec::new();
        for &d in dims {
            put_varint_field(&mut t, TENSOR_DIMS, d);
        }
        put_varint_field(&mut t, TENSOR_TYPE, INT8);
        put_bytes(&mut t, TENSOR_NAME, name.as_bytes());
        put_bytes(&mut t, TENSOR_RAW, &vec![1u8; dims.iter().product::<u64>() as usize]);
        t
    }

    /// x·W with W = Cast(Wq)·s (per column), and an embedding table E = Cast(Eq)·r (per
    /// row) looked up by `ids`, plus a node that has nothing to do with either.
    fn model() -> Vec<u8> {
        let mut graph = Vec::new();
        let nodes = [
            encode_node("cast_w", "Cast", "", &["wq"], &["wf"], Some(("to", 1))),
            encode_node("mul_w", "Mul", "", &["wf", "ws"], &["w"], None),
            encode_node("mm", "MatMul", "", &["x", "w"], &["y"], None),
            encode_node("cast_e", "Cast", "", &["eq"], &["ef"], Some(("to", 1))),
            encode_node("mul_e", "Mul", "", &["ef", "es"], &["e"], None),
            encode_node("lookup", "Gather", "", &["e", "ids"], &["emb"], None),
            encode_node("other", "Relu", "", &["y"], &["z"], None),
        ];
        for n in &nodes {
            put_bytes(&mut graph, GRAPH_NODE, n);
        }
        put_bytes(&mut graph, GRAPH_INITIALIZER, &int8_tensor("wq", &[4, 3]));
        put_bytes(&mut graph, GRAPH_INITIALIZER, &float_tensor("ws", &[1, 3], &[0u8; 12]));
        put_bytes(&mut graph, GRAPH_INITIALIZER, &int8_tensor("eq", &[5, 3]));
        put_bytes(&mut graph, GRAPH_INITIALIZER, &float_tensor("es", &[5, 1], &[0u8; 20]));
        put_bytes(&mut graph, GRAPH_INPUT, &value_info("x"));
        put_bytes(&mut graph, GRAPH_INPUT, &value_info("ids"));
        put_bytes(&mut graph, GRAPH_OUTPUT, &value_info("z"));
        put_bytes(&mut graph, GRAPH_OUTPUT, &value_info("emb"));
        let mut model = Vec::new();
        put_varint_field(&mut model, 1, 10);
        put_bytes(&mut model, MODEL_GRAPH, &graph);
        model
    }

    /// Each node's operator, domain and inputs.
    type Nodes = Vec<(String, String, Vec<String>)>;

    /// The nodes and the initializers' names of `model`.
    fn graph_of(model: &[u8]) -> (Nodes, Vec<String>) {
        let model = fields(model).unwrap();
        let graph = fields(model.iter().find(|f| f.number == MODEL_GRAPH).unwrap().bytes().unwrap()).unwrap();
        let nodes = graph
            .iter()
            .filter(|f| f.number == GRAPH_NODE)
            .map(|f| Node::read(f).unwrap())
            .map(|n| (n.op.to_owned(), n.domain.to_owned(), n.inputs.iter().map(|s| (*s).to_owned()).collect()))
            .collect();
        let tensors = graph.iter().filter(|f| f.number == GRAPH_INITIALIZER).map(|f| Tensor::read(f).unwrap().name.to_owned()).collect();
        (nodes, tensors)
    }

    #[test]
    fn dequantized_weights_are_read_as_int8() {
        let (out, rewritten) = int8_weights(&model()).unwrap().expect("the pattern is there");
        assert_eq!(rewritten, Rewritten { matmuls: 1, gathers: 1 });
        let (nodes, tensors) = graph_of(&out);
        let ops: Vec<&str> = nodes.iter().map(|(op, _, _)| op.as_str()).collect();
        assert_eq!(ops, ["DynamicQuantizeMatMul", "Gather", "Gather", "Cast", "Mul", "Relu"], "{nodes:?}");
        assert_eq!(nodes[0].1, MS_DOMAIN);
        assert_eq!(nodes[0].2, ["x", "wq", "ws.per_column"]);
        assert_eq!(nodes[1].2, ["eq", "ids"], "the int8 table is looked up");
        assert_eq!(nodes[2].2, ["es", "ids"], "per-row scales are looked up too");
        assert_eq!(nodes[4].2, ["emb.float", "emb.scales"]);
        // The per-column scales as a 1-D tensor; the [1, 3] one nothing reads is gone.
        assert_eq!(tensors, ["wq", "eq", "es", "ws.per_column"]);
        let model = fields(&out).unwrap();
        let opsets: Vec<_> = model.iter().filter(|f| f.number == MODEL_OPSET).collect();
        assert_eq!(opsets.len(), 1, "the contrib domain is declared");
    }

    #[test]
    fn a_graph_without_the_pattern_is_left_alone() {
        let mut graph = Vec::new();
        put_bytes(&mut graph, GRAPH_NODE, &encode_node("mm", "MatMul", "", &["x", "w"], &["y"], None));
        put_bytes(&mut graph, GRAPH_INITIALIZER, &float_tensor("w", &[2, 2], &[0u8; 16]));
        let mut model = Vec::new();
        put_bytes(&mut model, MODEL_GRAPH, &graph);
        assert!(int8_weights(&model).unwrap().is_none());
    }

    #[test]
    fn truncated_protobuf_is_an_error_not_a_panic() {
        let model = model();
        for cut in [1, 7, model.len() / 2, model.len() - 1] {
            let _ = int8_weights(&model[..cut]);
        }
        assert!(int8_weights(&[0x3a, 0xff]).is_err());
    }
}

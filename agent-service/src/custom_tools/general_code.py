# The general_code driver: runs INSIDE the sandbox (never in a service process). Reads one
# JSON request on stdin: {"mode": "describe"|"call", "files": [{"path", "data" (hex)}],
# "source": path of the file holding the function, "function": its name, "args": {...}}.
# Writes one JSON line after the marker on stdout.
import ast, asyncio, contextlib, inspect, io, json, os, sys, tempfile, traceback

MARK = "\n@@docchat-general-code@@\n"

def answer(obj):
    sys.__stdout__.write(MARK + json.dumps(obj, default=str) + "\n")
    sys.__stdout__.flush()

TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
         "list": "array", "List": "array", "tuple": "array", "Tuple": "array",
         "set": "array", "Set": "array", "Sequence": "array",
         "dict": "object", "Dict": "object", "Mapping": "object"}

def schema_of(ann):
    if ann is None:
        return {}
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            return schema_of(ast.parse(ann.value, mode="eval").body)
        except SyntaxError:
            return {}
    if isinstance(ann, ast.Name):
        t = TYPES.get(ann.id)
        return {"type": t} if t else {}
    if isinstance(ann, ast.Attribute):
        t = TYPES.get(ann.attr)
        return {"type": t} if t else {}
    if isinstance(ann, ast.Subscript):
        base = ann.value.attr if isinstance(ann.value, ast.Attribute) else getattr(ann.value, "id", "")
        if base == "Optional":
            return schema_of(ann.slice)
        if base == "Union":
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            kinds = [schema_of(p) for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
            return kinds[0] if len(kinds) == 1 else {}
        if base in ("Literal",):
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return {"enum": [p.value for p in parts if isinstance(p, ast.Constant)]}
        out = schema_of(ast.Name(id=base))
        if out.get("type") == "array" and base in ("list", "List", "Sequence", "set", "Set"):
            items = schema_of(ann.slice)
            if items:
                out["items"] = items
        return out
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        kinds = [schema_of(p) for p in (ann.left, ann.right)
                 if not (isinstance(p, ast.Constant) and p.value is None)]
        return kinds[0] if len(kinds) == 1 else {}
    return {}

SECTIONS = ("args:", "arguments:", "parameters:", "params:", "returns:", "return:",
            "raises:", "yields:", "examples:", "example:", "note:", "notes:")

def parse_doc(doc):
    """The summary and per-parameter text (Google `Args:` or Sphinx `:param x:`)."""
    summary, params, section, current = [], {}, None, None
    for raw in doc.splitlines():
        line = raw.strip()
        low = line.lower()
        if low.startswith(":param "):
            head, _, text = line[len(":param "):].partition(":")
            current = head.split()[-1] if head.split() else None
            if current:
                params[current] = text.strip()
            section = "sphinx"
            continue
        if low.startswith(":"):
            section, current = "sphinx", None
            continue
        if low in SECTIONS:
            section, current = low, None
            continue
        if section in ("args:", "arguments:", "parameters:", "params:"):
            if not line:
                continue
            indent = len(raw) - len(raw.lstrip())
            head, sep, text = line.partition(":")
            name = head.split(" ")[0].strip("*")
            if sep and name.isidentifier() and (current is None or indent <= params.get("__indent__", indent)):
                current = name
                params[name] = text.strip()
                params.setdefault("__indent__", indent)
            elif current:
                params[current] = (params[current] + " " + line).strip()
            continue
        if section is None:
            summary.append(line)
        elif section == "sphinx" and current and line:
            params[current] = (params[current] + " " + line).strip()
    params.pop("__indent__", None)
    return "\n".join(summary).strip(), params

def describe(text, name):
    tree = ast.parse(text)
    fn = next((n for n in tree.body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)
    if fn is None:
        return {"error": "no top-level function %s in the file" % name}
    summary, texts = parse_doc(ast.get_docstring(fn) or "")
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    props, required = {}, []
    pairs = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
    for arg, default in pairs:
        if arg.arg in ("self", "cls"):
            continue
        prop = schema_of(arg.annotation)
        if arg.arg in texts and texts[arg.arg]:
            prop["description"] = texts[arg.arg]
        if default is None:
            required.append(arg.arg)
        else:
            try:
                prop["default"] = ast.literal_eval(default)
            except Exception:
                pass
        props[arg.arg] = prop
    params = {"type": "object", "properties": props, "required": required}
    if a.kwarg is None:
        params["additionalProperties"] = False
    return {"description": summary, "parameters": params}

def main():
    req = json.load(sys.stdin)
    root = tempfile.mkdtemp(prefix="tool-")
    for f in req["files"]:
        path = os.path.normpath(os.path.join(root, f["path"]))
        if not path.startswith(root + os.sep):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(bytes.fromhex(f["data"]))
    source = os.path.join(root, req["source"])
    name = req["function"]
    if req["mode"] == "describe":
        with open(source, encoding="utf-8") as f:
            answer(describe(f.read(), name))
        return
    sys.path[:0] = [os.path.dirname(source), root]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            import importlib.util
            spec = importlib.util.spec_from_file_location("docchat_custom_tool", source)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            result = getattr(module, name)(**req["args"])
            if inspect.isawaitable(result):
                result = asyncio.run(result)
    except BaseException:
        answer({"ok": False, "error": traceback.format_exc(limit=8), "printed": printed.getvalue()})
        return
    text = result if isinstance(result, str) else json.dumps(result, default=str)
    answer({"ok": True, "result": text, "printed": printed.getvalue()})

main()

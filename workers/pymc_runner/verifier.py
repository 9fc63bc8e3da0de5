"""Static check of a PyMC program against a SPEC §2.1 profile (default: strict).

The threat is a program that fakes its posterior or escapes its process: adding
log-density terms that are not observed random variables, running its own sampler or
the C compiler with its own flags, writing files through a library's writer, or reaching
any of those through introspection. The check is an allow-list throughout
(``profile.py``): every module member, every attribute on a value and every builtin a
program names must be listed, so a construct nobody thought of is refused by default.
On top, the forgery rules: ``observed=`` values derived from ``data``
(``provenance.py``), no ``total_size``, no variable named like a §2.3 scalar name.

It never imports the program's libraries, so it is cheap enough for the API process.
Every refusal is a ``ProgramRefused`` naming the construct and its line.
"""
from __future__ import annotations

import ast

from workers.errors import CompileError, ProgramRefused
from workers.pymc_runner import profile as P
from workers.pymc_runner.provenance import DataFlow

LANGUAGE = "pymc"
_REFUSED_STATEMENTS = {
    ast.ClassDef: "class definitions are not allowed",
    ast.Global: "global statements are not allowed",
    ast.Nonlocal: "nonlocal statements are not allowed",
    ast.AsyncFunctionDef: "async functions are not allowed",
    ast.AsyncFor: "async loops are not allowed",
    ast.AsyncWith: "async with is not allowed",
    ast.Await: "await is not allowed",
    ast.Match: "match statements are not allowed",
}
_MODEL_FUNCTIONS = ("model", "make_model")
# PyMC members that create a named model variable (the name is the first argument).
_NAMED_VARIABLES = (P.PYMC_DISTRIBUTIONS | (P.PYMC_MODEL - {"Model"})
                    | P._names("Potential CustomDist DensityDist"))
_SHORT = {"pymc": "pm", "numpy": "np", "pytensor.tensor": "pt"}


def _refuse(reason: str, node: ast.AST | None) -> ProgramRefused:
    return ProgramRefused(reason, language=LANGUAGE, line=getattr(node, "lineno", None))


def verify(source: str, profile: P.Profile = P.STRICT) -> None:
    """Raise ``ProgramRefused`` (with the offending line) unless ``source`` fits ``profile``.

    A source that is not valid Python raises ``CompileError`` with the line.
    """
    if len(source) > P.MAX_SOURCE_CHARS:
        raise ProgramRefused(f"program longer than {P.MAX_SOURCE_CHARS} characters",
                             language=LANGUAGE)
    try:
        tree = ast.parse(source, filename="<model.py>", mode="exec")
    except SyntaxError as exc:
        raise CompileError(f"invalid Python: {exc.msg}", language=LANGUAGE,
                           line=exc.lineno) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ProgramRefused(f"program cannot be parsed safely ({type(exc).__name__})",
                             language=LANGUAGE) from None
    try:
        _Checker(tree, profile).run()
    except RecursionError:
        raise ProgramRefused("program is nested too deeply", language=LANGUAGE) from None


class _Checker:
    def __init__(self, tree: ast.Module, profile: P.Profile) -> None:
        self.tree = tree
        self.profile = profile
        self.parents: dict[ast.AST, ast.AST] = {}
        self.module_aliases: dict[str, str] = {}  # bound name -> module path
        self.member_imports: dict[str, tuple[str, str]] = {}  # bound name -> (path, member)
        self.bound: set[str] = set()  # every name the program binds anywhere
        self.model_defs: list[ast.FunctionDef] = []

    def run(self) -> None:
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self._collect_imports()
        self._collect_bound_names()
        self._check_model_definition()
        for node, entering in _traverse(self.tree):
            if entering:
                self._check_header(node)
            else:
                self._check_node(node)
        self._check_observed_values()

    # -- imports ---------------------------------------------------------------------
    def _collect_imports(self) -> None:
        values: list[tuple[str, ast.AST]] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._bind_module(self._import_path(alias, node), node,
                                      alias.asname or alias.name)
            elif isinstance(node, ast.ImportFrom):
                values.extend(self._check_import_from(node))
        # Checked after all module aliases are known: a value may not shadow one.
        for name, node in values:
            self._check_binding(name, node)

    def _allowed_imports(self) -> str:
        return ", ".join(P.ROOT_MODULES)

    def _import_path(self, alias: ast.alias, node: ast.Import) -> str:
        path = alias.name
        if path not in self.profile.modules:
            if path in P.STANDARD.modules:
                raise _refuse(f"import of {path!r} is not allowed in the "
                              f"{self.profile.name} profile (the `standard` profile allows "
                              f"it for {', '.join(sorted(P.STANDARD.modules[path]))})", node)
            raise _refuse(f"import of {path!r} is not allowed (allowed: "
                          f"{self._allowed_imports()} and their listed sub-modules)", node)
        if "." in path and not alias.asname:
            # `import pytensor.tensor` would bind `pytensor`, the whole package.
            raise _refuse(f"write `import {path} as <name>`: a dotted import without "
                          "`as` binds the parent package", node)
        return path

    def _check_import_from(self, node: ast.ImportFrom) -> list[tuple[str, ast.AST]]:
        """Bind imported sub-modules; return the (name, node) of imported values."""
        module = node.module or ""
        values = []
        if node.level:
            raise _refuse("relative imports are not allowed", node)
        for alias in node.names:
            if alias.name == "*":
                raise _refuse(f"`from {module} import *` is not allowed", node)
            bound = alias.asname or alias.name
            whole = f"{module}.{alias.name}"
            if module not in self.profile.modules:
                if module in P.PARENT_PACKAGES and whole in self.profile.modules:
                    self._bind_module(whole, node, bound)
                    continue
                if alias.name in P.STANDARD.modules.get(module, ()):
                    raise _refuse(f"from {module} import {alias.name} is not allowed in the "
                                  f"{self.profile.name} profile (the `standard` profile "
                                  "allows it)", node)
                raise _refuse(f"import from {module!r} is not allowed (allowed: "
                              f"{self._allowed_imports()})", node)
            reached = self._member(module, alias.name, node)
            if reached is not None:
                self._bind_module(reached, node, bound)
            else:
                self.member_imports[bound] = (module, alias.name)
                values.append((bound, node))
        return values

    def _bind_module(self, path: str, node: ast.AST, bound: str) -> None:
        self._check_identifier(bound, node)
        if bound in self.module_aliases and self.module_aliases[bound] != path:
            raise _refuse(f"name {bound!r} is bound to two different modules", node)
        self.module_aliases[bound] = path

    def _member(self, path: str, name: str, node: ast.AST) -> str | None:
        """Check ``<module path>.<name>``; return the sub-module path if it is one."""
        shown = _short(path)
        if name.startswith("_"):
            raise _refuse(f"private or dunder member {shown}.{name} is not allowed", node)
        if f"{path}.{name}" in self.profile.modules:
            return f"{path}.{name}"
        if name in self.profile.modules.get(path, ()):
            return None
        raise _refuse(f"{shown}.{name} is not allowed: {_why(name, shown, self.profile)}",
                      node)

    # -- names -----------------------------------------------------------------------
    def _collect_bound_names(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.bound.update(a.asname or a.name.split(".")[0] for a in node.names)

    def _check_model_definition(self) -> None:
        """``def model(data)`` (or ``def make_model(data, ...)``), bound once, at top level."""
        for name in _MODEL_FUNCTIONS:
            bindings = [n for n in self.tree.body if _binds_top_level(n, name)]
            if len(bindings) > 1:
                raise _refuse(f"`{name}` is defined more than once", bindings[1])
            if bindings and not isinstance(bindings[0], ast.FunctionDef):
                raise _refuse(f"`{name}` must be a top-level function `def {name}(data)`",
                              bindings[0])
            self.model_defs += bindings
        if not self.model_defs:
            raise _refuse("the program must define a top-level function `def model(data)`",
                          None)
        for node in self.model_defs:
            args = node.args
            if not (args.posonlyargs or args.args or args.vararg):
                raise _refuse(f"`{node.name}` must take the data dict as its argument", node)

    # -- every node ------------------------------------------------------------------
    def _check_header(self, node: ast.AST) -> None:
        """Checks made on entering a node, before its children: statement kinds, function
        headers (a refused argument name is reported before uses in the body), calls."""
        for kind, reason in _REFUSED_STATEMENTS.items():
            if isinstance(node, kind):
                raise _refuse(reason, node)
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            self._check_function(node)
        elif isinstance(node, ast.Call):
            self._check_call(node)

    def _check_node(self, node: ast.AST) -> None:
        """Checks made after a node's children: for ``pm.model.Potential`` the first
        thing wrong reading left to right (``pm.model``) is reported."""
        if isinstance(node, ast.Name):
            self._check_name(node)
        elif isinstance(node, ast.Attribute):
            self._check_attribute(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if any(isinstance(n, ast.Attribute) for n in ast.walk(node.value)):
                raise _refuse("item assignment into an attribute (x.y[...] = ...) is not "
                              "allowed", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if P.DUNDER_IN_STRING.search(text):
                raise _refuse("strings naming dunder attributes are not allowed", node)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._check_binding(node.name, node)

    def _check_function(self, node: ast.FunctionDef | ast.Lambda) -> None:
        if isinstance(node, ast.FunctionDef):
            if node.decorator_list:
                raise _refuse("decorators are not allowed", node.decorator_list[0])
            self._check_binding(node.name, node)
        a = node.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                self._check_binding(arg.arg, arg)

    def _check_identifier(self, name: str, node: ast.AST) -> None:
        if name.startswith("__"):
            raise _refuse(f"dunder name {name} is not allowed", node)
        if name in P.FORBIDDEN_NAMES:
            raise _refuse(P.FORBIDDEN_NAMES[name], node)

    def _check_binding(self, name: str, node: ast.AST) -> None:
        self._check_identifier(name, node)
        if name in self.module_aliases:
            raise _refuse(f"name {name!r} is the module alias and may not be rebound", node)

    def _check_name(self, node: ast.Name) -> None:
        self._check_identifier(node.id, node)
        if not isinstance(node.ctx, ast.Load):
            self._check_binding(node.id, node)
            return
        if node.id in self.module_aliases:
            self._require_member_access(node, _short(self.module_aliases[node.id]))
        elif node.id in self.member_imports and ".".join(
                self.member_imports[node.id]) in self.profile.call_arguments:
            self._require_direct_call(node, node.id)
        elif node.id not in self.bound and node.id not in self.profile.builtins:
            raise _refuse(f"name {node.id!r} is not allowed: it is neither defined by the "
                          f"program nor an allowed builtin", node)

    def _require_direct_call(self, node: ast.AST, shown: str) -> None:
        """A member whose call arguments are restricted (``pytensor.scan``) may only be
        called where it is named: passed on or aliased, its calls could not be checked."""
        parent = self.parents.get(node)
        if not (isinstance(parent, ast.Call) and parent.func is node):
            raise _refuse(f"{shown} may only be called directly ({shown}(...)): its "
                          "arguments are checked", node)

    def _require_member_access(self, node: ast.AST, shown: str) -> None:
        """A module may only appear as ``module.member``: no aliasing, no passing it on."""
        parent = self.parents.get(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            raise _refuse(f"module {shown} may only be used as {shown}.<name>", node)

    def _check_attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            raise _refuse(f"assigning or deleting attributes (.{node.attr}) is not allowed",
                          node)
        base = self._module_path(node.value)
        if base is not None:
            reached = self._member(base, node.attr, node)
            if reached is not None:
                self._require_member_access(node, _short(reached))
            elif f"{base}.{node.attr}" in self.profile.call_arguments:
                self._require_direct_call(node, f"{_short(base)}.{node.attr}")
            return
        if node.attr.startswith("_"):
            raise _refuse(f".{node.attr}: private and dunder attributes are not allowed",
                          node)
        if node.attr not in self.profile.value_attributes:
            raise _refuse(f".{node.attr} is not allowed: {_why(node.attr, None)}", node)

    def _module_path(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.module_aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._module_path(node.value)
            if base is not None and f"{base}.{node.attr}" in self.profile.modules:
                return f"{base}.{node.attr}"
        return None

    # -- calls and the forgery rules ---------------------------------------------------
    def _check_call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg is None:
                raise _refuse("`**` unpacking in a call is not allowed: keyword arguments "
                              "must be written out", keyword.value)
            if keyword.arg == "file" and isinstance(node.func, ast.Name) \
                    and node.func.id == "print":
                raise _refuse("print(file=...) is not allowed: it calls the object's write "
                              "method", node)
            if keyword.arg == "total_size" and self.profile.refuse_total_size:
                raise _refuse("total_size is not allowed: it rescales the likelihood "
                              "(a tempered likelihood without minibatches)", node)
        path, member = self._callee(node)
        if self.profile.refuse_scalar_like_names and member in _NAMED_VARIABLES \
                and path in ("pymc", "pymc.distributions"):
            self._check_variable_name(node)
        limits = self.profile.call_arguments.get(f"{path}.{member}")
        if limits is not None:
            self._check_call_arguments(node, f"{_short(path)}.{member}", *limits)

    def _callee(self, node: ast.Call) -> tuple[str | None, str | None]:
        """(module path, member) when the call is of a module member, else (None, None)."""
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.member_imports:
            return self.member_imports[func.id]
        if isinstance(func, ast.Attribute):
            path = self._module_path(func.value)
            if path is not None:
                return path, func.attr
        return None, None

    @staticmethod
    def _check_call_arguments(node: ast.Call, shown: str, positional: int,
                              keywords: frozenset[str]) -> None:
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise _refuse(f"`*` unpacking in a call of {shown} is not allowed", node)
        if len(node.args) > positional:
            raise _refuse(f"{shown} takes at most {positional} positional arguments here "
                          "(the later ones configure the compiler)", node)
        for keyword in node.keywords:
            if keyword.arg not in keywords:
                raise _refuse(f"{shown}({keyword.arg}=...) is not allowed (allowed "
                              f"keywords: {', '.join(sorted(keywords))})", node)

    def _check_variable_name(self, node: ast.Call) -> None:
        names = [k.value for k in node.keywords if k.arg == "name"]
        names += node.args[:1]
        for name in names:
            parts = [name] if not isinstance(name, ast.JoinedStr) else name.values
            for part in parts:
                if isinstance(part, ast.Constant) and isinstance(part.value, str) \
                        and P.SCALAR_NAME_CHARACTERS.search(part.value):
                    raise _refuse(f"variable name {part.value!r} is not allowed: a name "
                                  "with [ or ] is, or collides with, a SPEC §2.3 scalar "
                                  "name of another variable", node)

    def _check_observed_values(self) -> None:
        if not self.profile.observed_from_data:
            return
        flow = DataFlow(self.tree, {f: _first_param(f) for f in self.model_defs})
        calls = sorted((n for n in ast.walk(self.tree) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))  # report the first in the text
        for node in calls:
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg != "observed" or (
                        isinstance(value, ast.Constant) and value.value is None):
                    continue
                if not flow.derived(value):
                    shown = ast.unparse(value)
                    shown = shown if len(shown) <= 40 else shown[:37] + "..."
                    raise _refuse(f"observed={shown} is not allowed: observed values must "
                                  "be derived from the `data` argument (a literal or "
                                  "constant observation adds an arbitrary log-density "
                                  "term)", value)


def _first_param(func: ast.FunctionDef) -> str:
    a = func.args
    params = [*a.posonlyargs, *a.args] or [a.vararg]
    return params[0].arg


def _why(name: str, shown_module: str | None, profile: P.Profile | None = None) -> str:
    why = _why_refused(name, shown_module)
    if profile is not None and shown_module and profile.name != P.STANDARD.name and any(
            name in members for path, members in P.STANDARD.modules.items()
            if _short(path) == shown_module):
        why += " (the `standard` profile allows it)"
    return why


def _why_refused(name: str, shown_module: str | None) -> str:
    if name in P.WHY_REFUSED:
        return P.WHY_REFUSED[name]
    for prefix, why in P.WHY_REFUSED_PREFIXES.items():
        if name.startswith(prefix) and shown_module == "pm":
            return why
    where = f"of {shown_module}'s members" if shown_module else "of attributes on values"
    return f"it is not on the profile's allow-list {where}"


def _traverse(tree: ast.AST):
    """Yield (node, True) on entering and (node, False) on leaving, in source order."""
    stack: list[tuple[ast.AST, bool]] = [(tree, True)]
    while stack:
        node, entering = stack.pop()
        yield node, entering
        if entering:
            stack.append((node, False))
            stack.extend((child, True) for child in reversed(list(ast.iter_child_nodes(node))))


def _binds_top_level(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return any(isinstance(t, ast.Name) and t.id == name
               for target in targets for t in ast.walk(target))


def _short(path: str) -> str:
    for long, short in _SHORT.items():
        if path == long or path.startswith(long + "."):
            return short + path[len(long):]
    return path

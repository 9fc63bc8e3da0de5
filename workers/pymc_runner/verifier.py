"""Static check of a PyMC program against SPEC §2.1's strict profile.

The threat is a program that fakes its posterior or escapes its process: adding
log-density terms that are not observed random variables (``pm.Potential``,
``CustomDist``, model internals), running its own sampler, touching files, network or
processes, or reaching any of those through introspection (dunders, frames,
``getattr`` on computed strings, module attributes such as ``pt.math.builtins``).

The check is an allow-list where that is practical (imports, sub-modules, builtins at
run time) and a deny-list for attribute names on arbitrary objects. It never imports
the program's libraries, so it is cheap enough for the API process.
"""
from __future__ import annotations

import ast

from workers.errors import CompileError, ProgramRefused
from workers.pymc_runner import profile as P

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


def _refuse(reason: str, node: ast.AST | None) -> ProgramRefused:
    return ProgramRefused(reason, language=LANGUAGE, line=getattr(node, "lineno", None))


def verify(source: str) -> None:
    """Raise ``ProgramRefused`` (with the offending line) unless ``source`` fits the profile.

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
        _Checker(tree).run()
    except RecursionError:
        raise ProgramRefused("program is nested too deeply", language=LANGUAGE) from None


class _Checker:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        self.module_aliases: dict[str, str] = {}  # bound name -> module path

    def run(self) -> None:
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self._collect_imports()
        self._check_model_definition()
        for node, entering in _traverse(self.tree):
            if entering:
                self._check_header(node)
            else:
                self._check_node(node)

    # -- imports ---------------------------------------------------------------------
    def _collect_imports(self) -> None:
        value_bindings: list[tuple[str, ast.AST]] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._bind_module(self._import_path(alias, node), node,
                                      alias.asname or alias.name)
            elif isinstance(node, ast.ImportFrom):
                value_bindings.extend(self._check_import_from(node))
        # Checked after all module aliases are known: a value may not shadow one.
        for name, node in value_bindings:
            self._check_binding(name, node)

    def _import_path(self, alias: ast.alias, node: ast.Import) -> str:
        path = alias.name
        if path not in P.ALLOWED_MODULE_PATHS:
            raise _refuse(f"import of {path!r} is not allowed (allowed: pymc, numpy, "
                          "pytensor.tensor, math, scipy.special)", node)
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
            if module not in P.ALLOWED_MODULE_PATHS:
                if whole in P.ALLOWED_MODULE_PATHS and module in ("pytensor", "scipy"):
                    self._bind_module(whole, node, bound)
                    continue
                raise _refuse(f"import from {module!r} is not allowed (allowed: pymc, "
                              "numpy, pytensor.tensor, math, scipy.special)", node)
            reached = self._member(module, alias.name, node)
            if reached is not None:
                self._bind_module(reached, node, bound)
            else:
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
        if name in P.ALLOWED_SUBMODULES.get(path, ()):
            return f"{path}.{name}"
        if name in P.MODULE_ATTRIBUTES.get(path, ()):
            raise _refuse(f"module {shown}.{name} is not allowed", node)
        reason = P.FORBIDDEN_MEMBERS.get(path, {}).get(name)
        if reason is None and path == "pymc":
            reason = next((why for prefix, why in P.PYMC_FORBIDDEN_PREFIXES.items()
                           if name.startswith(prefix)), None)
        if reason is not None:
            raise _refuse(f"{shown}.{name} is not allowed: {reason}", node)
        reason = _attribute_reason(name)
        if reason is not None:
            raise _refuse(f"{shown}.{name}: {reason}", node)
        return None

    # -- the model function ----------------------------------------------------------
    def _check_model_definition(self) -> None:
        bindings = [n for n in self.tree.body if _binds_top_level(n, "model")]
        defs = [n for n in bindings if isinstance(n, ast.FunctionDef)]
        if not defs:
            raise _refuse("the program must define a top-level function `def model(data)`",
                          bindings[0] if bindings else None)
        if len(bindings) > 1:
            raise _refuse("`model` is defined more than once", bindings[1])
        args = defs[0].args
        if not (args.posonlyargs or args.args or args.vararg):
            raise _refuse("`model` must take the data dict as its argument", defs[0])

    # -- every node ------------------------------------------------------------------
    def _check_header(self, node: ast.AST) -> None:
        """Checks made on entering a node, before its children: statement kinds, function
        headers (a refused argument name is reported before uses in the body), and
        getattr/hasattr calls (before their arguments)."""
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
            self._require_member_access(node, node.id)
        if node.id in P.LITERAL_ATTRIBUTE_BUILTINS:
            parent = self.parents.get(node)
            if not (isinstance(parent, ast.Call) and parent.func is node):
                raise _refuse(f"{node.id} may only be called directly", node)

    def _require_member_access(self, node: ast.AST, shown: str) -> None:
        """A module may only appear as ``module.member``: no aliasing, no passing it on."""
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                and parent.func.id in P.LITERAL_ATTRIBUTE_BUILTINS
                and parent.args and parent.args[0] is node):
            return  # getattr(pm, "Normal"): the literal was checked as pm.Normal
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
            return
        reason = _attribute_reason(node.attr)
        if reason is not None:
            raise _refuse(f".{node.attr}: {reason}", node)

    def _module_path(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.module_aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._module_path(node.value)
            if base is not None and node.attr in P.ALLOWED_SUBMODULES.get(base, ()):
                return f"{base}.{node.attr}"
        return None

    def _check_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in P.LITERAL_ATTRIBUTE_BUILTINS:
            if len(node.args) not in (2, 3) or node.keywords or not (
                    isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)):
                raise _refuse(f"{func.id}() needs a literal attribute name (write obj.name)",
                              node)
            name = node.args[1].value
            if not name.isidentifier():
                raise _refuse(f"{func.id}() with {name!r} is not an attribute name", node)
            self._check_attribute(ast.copy_location(
                ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load()), node))


def _traverse(tree: ast.AST):
    """Yield (node, True) on entering and (node, False) on leaving, in source order."""
    stack: list[tuple[ast.AST, bool]] = [(tree, True)]
    while stack:
        node, entering = stack.pop()
        yield node, entering
        if entering:
            stack.append((node, False))
            stack.extend((child, True) for child in reversed(list(ast.iter_child_nodes(node))))


def _attribute_reason(name: str) -> str | None:
    if name.startswith("_"):
        return "private and dunder attributes are not allowed"
    if name in P.FORBIDDEN_ATTRIBUTES:
        return P.FORBIDDEN_ATTRIBUTES[name]
    if name.startswith(P.FORBIDDEN_ATTRIBUTE_PREFIXES):
        return "frame, code and function internals are not allowed"
    return None


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


_SHORT = {"pymc": "pm", "numpy": "np", "pytensor.tensor": "pt", "scipy.special": "scipy.special"}


def _short(path: str) -> str:
    for long, short in _SHORT.items():
        if path == long or path.startswith(long + "."):
            return short + path[len(long):]
    return path

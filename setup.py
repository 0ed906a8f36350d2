"""Map the repo-root folders into the agentkit.* namespace (metadata lives in pyproject.toml).

recipes/, eval/, extras/ and tool_servers/ sit at the root for readability but install as
agentkit.recipes, agentkit.eval, agentkit.extras and agentkit.tool_servers, never as top-level packages.
"""

from setuptools import find_packages, setup

ROOTS = {
    "agentkit": "agentkit",
    "agentkit.recipes": "recipes",
    "agentkit.eval": "eval",
    "agentkit.tool_servers": "tool_servers",
    "agentkit.extras": "extras",
}

package_dir, packages = {}, []
for pkg, folder in ROOTS.items():
    package_dir[pkg] = folder
    packages.append(pkg)
    for sub in find_packages(folder):
        packages.append(f"{pkg}.{sub}")
        package_dir[f"{pkg}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(package_dir=package_dir, packages=packages)

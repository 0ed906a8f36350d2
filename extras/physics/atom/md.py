r"""Molecular dynamics of the MD17 molecules here, without a download: each molecule is built from its SMILES by
RDKit (hydrogens added, one conformer embedded and MMFF94-relaxed), RDKit's MMFF94 force field is wrapped as an ASE
calculator, and ASE integrates it: Langevin at temperature T to equilibrate, then velocity Verlet (NVE) for the
recorded trajectory, so each recorded future is a deterministic function of the present (positions, velocities).

Units: positions in Å, velocities in Å/fs, time in fs, energies in eV. MMFF94 gives kcal/mol and kcal/mol/Å:

.. math::
    E = E_{\mathrm{MMFF}} \cdot \frac{\mathrm{kcal}}{\mathrm{mol}},\qquad F = -\nabla_x E_{\mathrm{MMFF}} \cdot
    \frac{\mathrm{kcal}}{\mathrm{mol}}

(``ase.units.kcal / ase.units.mol`` = 0.0434 eV). ASE's own velocity unit is Å per ASE time unit (10.18 fs):
``v_Å/fs = v_ASE · ase.units.fs``.

>>> traj = simulate("ethanol", frames=3, every=2, temperature=300.0, equilibrate=20, seed=0)
>>> traj["positions"].shape, traj["velocities"].shape, traj["z"].tolist()
((3, 9, 3), (3, 9, 3), [6, 6, 8, 1, 1, 1, 1, 1, 1])
"""

from __future__ import annotations

import numpy as np

# The eight MD17 molecules (Chmiela et al. 2017), as SMILES.
MD17 = {
    "aspirin": "CC(=O)Oc1ccccc1C(=O)O",
    "benzene": "c1ccccc1",
    "ethanol": "CCO",
    "malonaldehyde": "O=CCC=O",
    "naphthalene": "c1ccc2ccccc2c1",
    "salicylic_acid": "OC(=O)c1ccccc1O",
    "toluene": "Cc1ccccc1",
    "uracil": "O=C1C=CNC(=O)N1",
}


def molecule(name: str, seed: int = 0):
    """The RDKit molecule of ``name`` (an ``MD17`` key) with hydrogens and one MMFF94-relaxed conformer embedded
    with ``seed``."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles(MD17[name]))
    if AllChem.EmbedMolecule(mol, randomSeed=seed) != 0:
        raise RuntimeError(f"RDKit could not embed a conformer of {name} (seed {seed})")
    AllChem.MMFFOptimizeMolecule(mol, maxIters=2000)
    return mol


def mmff_calculator(mol):
    """RDKit's MMFF94 force field of ``mol`` as an ASE ``Calculator`` (energy and forces, in eV and eV/Å)."""
    from ase import units
    from ase.calculators.calculator import Calculator, all_changes
    from rdkit.Chem import AllChem

    props = AllChem.MMFFGetMoleculeProperties(mol)
    ff = AllChem.MMFFGetMoleculeForceField(mol, props)
    kcal = units.kcal / units.mol

    class MMFF94(Calculator):
        implemented_properties = ["energy", "forces"]

        def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
            super().calculate(atoms, properties, system_changes)
            pos = self.atoms.positions.ravel().tolist()
            self.results = {
                "energy": ff.CalcEnergy(pos) * kcal,
                "forces": -np.asarray(ff.CalcGrad(pos)).reshape(-1, 3) * kcal,
            }

    return MMFF94()


def atoms_of(mol):
    """The ASE ``Atoms`` of ``mol``'s conformer, with the MMFF94 calculator attached."""
    from ase import Atoms

    atoms = Atoms(
        numbers=[a.GetAtomicNum() for a in mol.GetAtoms()], positions=mol.GetConformer().GetPositions().copy()
    )
    atoms.calc = mmff_calculator(mol)
    return atoms


def bonds(mol) -> np.ndarray:
    """The covalent bonds of ``mol`` as an ``[N, N]`` 0/1 matrix (the graph the EGNN baselines get; ATOM uses
    none)."""
    n = mol.GetNumAtoms()
    adj = np.zeros((n, n), dtype=np.float32)
    for b in mol.GetBonds():
        i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        adj[i, j] = adj[j, i] = 1.0
    return adj


def simulate(
    name: str,
    frames: int,
    every: int,
    temperature: float,
    timestep_fs: float = 0.5,
    equilibrate: int = 1000,
    friction: float = 0.01,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """One trajectory of ``name``: ``equilibrate`` Langevin steps at ``temperature`` K (friction per fs) from
    Maxwell–Boltzmann velocities, then ``frames`` frames of velocity-Verlet (NVE) dynamics, one every ``every``
    steps of ``timestep_fs``.

    Returns ``positions`` and ``velocities`` ``[frames, N, 3]`` (float32, Å and Å/fs), ``z [N]`` (atomic numbers),
    ``bonds [N, N]`` and ``energy [frames]`` (eV, total).
    """
    from ase import units
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation
    from ase.md.verlet import VelocityVerlet

    mol = molecule(name, seed)
    atoms = atoms_of(mol)
    rng = np.random.default_rng(seed)
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
    Stationary(atoms)
    ZeroRotation(atoms)
    if equilibrate:
        Langevin(
            atoms,
            timestep_fs * units.fs,
            temperature_K=temperature,
            friction=friction / units.fs,
            fixcm=False,  # the models centre positions themselves; fixcm=True is deprecated (ASE 3.28)
            rng=rng,
        ).run(equilibrate)
    pos, vel, energy = [], [], []
    dyn = VelocityVerlet(atoms, timestep_fs * units.fs)
    for f in range(frames):
        if f:
            dyn.run(every)
        pos.append(atoms.get_positions())
        vel.append(atoms.get_velocities() * units.fs)
        energy.append(atoms.get_total_energy())
    return {
        "positions": np.asarray(pos, dtype=np.float32),
        "velocities": np.asarray(vel, dtype=np.float32),
        "z": atoms.numbers.astype(np.int64),
        "bonds": bonds(mol),
        "energy": np.asarray(energy),
    }

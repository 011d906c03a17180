"""Soil presets for soft-soil contact and deformable terrain, and the named ``soil.*`` parameters.

Each preset gives the Bekker pressure-sinkage constants (n, kc, kphi), the Mohr-Coulomb strength
(c, phi), the Janosi-Hanamoto shear deformation modulus K, bulk density rho, angle of repose and
the reloading modulus ku of Wong's repetitive-loading model. Sources, per preset:

* ``dry_sand`` - Land Locomotion Lab dry sand: n 1.1, kc 0.99 kN/m^(n+1), kphi 1528.43
  kN/m^(n+2), c 1.04 kPa, phi 28° (Bekker's measurements as tabulated by Wong, *Theory of Ground
  Vehicles*, 4th ed. 2008, ch. 2, table of terrain values).
* ``sandy_loam`` - LLL sandy loam, 15 % moisture: n 0.7, kc 5.27, kphi 1515.04, c 1.72 kPa,
  phi 29° (same table).
* ``lunar_regolith`` - lunar soil as recommended for mobility analysis in the *Lunar
  Sourcebook* (Heiken, Vaniman and French 1991, ch. 9, from Apollo data): n 1, kc 1.4 kN/m^2,
  kphi 820 kN/m^3, c 0.17 kPa, phi 35°, K 1.8 cm.
* ``toyoura_sand`` - the lunar regolith simulant of the thesis' Table C.2 (Ishigami et al.
  2007): n 1, kc 1.37 kN/m^2, kphi 814 kN/m^3, c 0.8 kPa, phi 37.2°.
* ``martian_regolith`` - Mars "crusty to cloddy" material at the Viking landing sites (Moore
  and Jakosky 1989): c 1.1 kPa, phi 30.8°. No in-situ bevameter data exist, so the
  pressure-sinkage constants (n, kc, kphi) are those of ``dry_sand`` - an assumption, named.

Values not in those tables are ours and marked *assumed* in :data:`SOIL_PRESETS`' notes: K
(Wong quotes ~1-2.5 cm for sands and loams, we use 1 cm for terrestrial soils), bulk densities,
the angle of repose (taken equal to phi for cohesionless soils), and ku (chosen so reloading to
the previous peak pressure of a ~20 kPa wheel costs well under a millimetre).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from wmr_model.errors import ParameterError
from wmr_model.parameters import ParameterSpec, register

__all__ = ["Soil", "SOIL_PRESETS", "SOIL_PARAMETER_NAMES", "get_soil", "bekker_params",
           "roams_params"]


@dataclass(frozen=True)
class Soil:
    """Soil constants in SI.

    Attributes:
        name: preset name; c: cohesion [Pa]; phi: internal friction angle [rad];
        kc: cohesive modulus [N/m^(n+1)]; kphi: frictional modulus [N/m^(n+2)];
        n: sinkage exponent [-]; K: shear deformation modulus [m]; rho: bulk density [kg/m^3];
        repose: angle of repose [rad]; ku: reloading modulus [N/m^3]; source: citation.
    """

    name: str
    c: float
    phi: float
    kc: float
    kphi: float
    n: float
    K: float
    rho: float
    repose: float
    ku: float
    source: str


_KU = 2.0e7  # assumed, see module docstring

SOIL_PRESETS: dict[str, Soil] = {
    "dry_sand": Soil("dry_sand", 1.04e3, math.radians(28.0), 0.99e3, 1528.43e3, 1.1, 0.01,
                     1600.0, math.radians(28.0), _KU,
                     "Wong 2008 ch. 2 table (LLL dry sand); K, rho, repose, ku assumed"),
    "sandy_loam": Soil("sandy_loam", 1.72e3, math.radians(29.0), 5.27e3, 1515.04e3, 0.7, 0.01,
                       1500.0, math.radians(29.0), _KU,
                       "Wong 2008 ch. 2 table (LLL sandy loam 15%); K, rho, repose, ku assumed"),
    "lunar_regolith": Soil("lunar_regolith", 170.0, math.radians(35.0), 1.4e3, 820.0e3, 1.0,
                           0.018, 1500.0, math.radians(35.0), _KU,
                           "Lunar Sourcebook 1991 ch. 9; rho, repose, ku assumed"),
    "toyoura_sand": Soil("toyoura_sand", 800.0, math.radians(37.2), 1.37e3, 8.14e5, 1.0, 0.036,
                         1600.0, math.radians(37.2), _KU,
                         "Seegmiller 2014 Table C.2 (Ishigami et al. 2007); repose, ku assumed"),
    "martian_regolith": Soil("martian_regolith", 1.1e3, math.radians(30.8), 0.99e3, 1528.43e3,
                             1.1, 0.01, 1400.0, math.radians(30.8), _KU,
                             "Moore and Jakosky 1989 (c, phi); n, kc, kphi of dry sand, K, "
                             "rho, repose, ku assumed"),
}

#: Names of the calibratable soil constants, ``soil.<field>``.
SOIL_PARAMETER_NAMES = tuple(f"soil.{k}" for k in ("c", "phi", "kc", "kphi", "n", "K", "rho",
                                                     "repose", "ku"))

_d = SOIL_PRESETS["dry_sand"]
register([
    ParameterSpec("soil.c", _d.c, "Pa", 0.0, 1e6, description=(
        "soil cohesion of the Mohr-Coulomb traction limit c A + F_N tan(phi) (ROAMS eq. 2, "
        "Bekker-Wong shear); too high lets wheels climb slopes they would stall on")),
    ParameterSpec("soil.phi", _d.phi, "rad", 0.0, 1.4, description=(
        "internal friction angle; with c = 0 the traction limit is Coulomb friction with "
        "mu = tan(phi); sets the steepest climbable slope")),
    ParameterSpec("soil.kc", _d.kc, "N/m^(n+1)", 0.0, 1e9, description=(
        "Bekker cohesive modulus of p = (kc/b + kphi) z^n; too low over-predicts sinkage and "
        "motion resistance")),
    ParameterSpec("soil.kphi", _d.kphi, "N/m^(n+2)", 0.0, 1e12, description=(
        "Bekker frictional modulus of p = (kc/b + kphi) z^n; too low over-predicts sinkage and "
        "motion resistance (slip on flat ground)")),
    ParameterSpec("soil.n", _d.n, "1", 0.05, 2.0, description=(
        "Bekker sinkage exponent; changes how sinkage grows with load (strongly correlated "
        "with kc, kphi: only their combination is observable from one wheel load)")),
    ParameterSpec("soil.K", _d.K, "m", 1e-5, 0.5, description=(
        "Janosi-Hanamoto shear deformation modulus: slip needed to mobilise traction; too "
        "high over-predicts slip at moderate drawbar pull")),
    ParameterSpec("soil.rho", _d.rho, "kg/m^3", 100.0, 5000.0, calibratable=False,
                  description=("bulk density of loose soil; scales displaced soil mass (ruts, "
                               "berms) only")),
    ParameterSpec("soil.repose", _d.repose, "rad", 0.0, 1.4, calibratable=False,
                  description=("angle of repose: steeper soil slopes avalanche down to it "
                               "(deformable terrain)")),
    ParameterSpec("soil.ku", _d.ku, "N/m^3", 1.0, 1e12, description=(
        "reloading modulus of pre-compacted soil (multipass); too low makes later wheels "
        "sink as much as the first")),
])


def get_soil(soil: str | Soil, **overrides: float) -> Soil:
    """Preset by name (or a :class:`Soil`) with fields overridden; unknown names raise."""
    if isinstance(soil, Soil):
        base = soil
    elif soil in SOIL_PRESETS:
        base = SOIL_PRESETS[soil]
    else:
        raise ParameterError(f"soil must be one of {sorted(SOIL_PRESETS)}, got {soil!r}")
    fields = asdict(base)
    for k, v in overrides.items():
        if k not in fields or k in ("name", "source"):
            raise ParameterError(f"soil: unknown constant {k!r}; known "
                                 f"{[f for f in fields if f not in ('name', 'source')]}")
        fields[k] = float(v)
    return Soil(**fields)


def bekker_params(soil: str | Soil) -> dict[str, float]:
    """Overrides for the ``bekker`` contact model (:mod:`wmr_model.contact.bekker`)."""
    s = get_soil(soil)
    return {"c": s.c, "phi": s.phi, "kc": s.kc, "kphi": s.kphi, "n": s.n, "K": s.K, "ku": s.ku}


def roams_params(soil: str | Soil) -> dict[str, float]:
    """Overrides for the ``roams`` contact model: its Terzaghi limit uses c and phi."""
    s = get_soil(soil)
    return {"c": s.c, "phi": s.phi}

package io.switchml.protocol;

/**
 * Where an appliance is found when nothing says otherwise: what the appliance (ApplianceContext), the worker
 * agents and the ops CLI agree on without depending on one another.
 */
public final class ApplianceDefaults
{
    /** TCP port of the control endpoint. */
    public static final int CONTROL_PORT = 7470;

    /** The appliance's directory: its counters file (counters.dat) and its event journal. */
    public static final String DIR = System.getProperty("java.io.tmpdir") + "/switchml";

    /** Name of the journal directory inside the appliance directory. */
    public static final String JOURNAL_DIRECTORY = "journal";

    private ApplianceDefaults()
    {
    }
}

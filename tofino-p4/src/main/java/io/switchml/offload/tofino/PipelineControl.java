package io.switchml.offload.tofino;

import java.util.List;

/**
 * The control-plane face of a switch pipeline running the SwitchML P4 program: what a P4Runtime {@code Write}
 * carries, with P4Info names instead of ids. The Java pipeline model implements it directly; the in-process
 * P4Runtime server of the tests translates ids to names through the P4Info and calls it; a real Tofino is reached
 * through the P4Runtime client instead.
 * <p>
 * Errors are reported as a switch reports them: a {@link PipelineException} carrying the canonical gRPC status
 * code name ({@code NOT_FOUND}, {@code ALREADY_EXISTS}, {@code RESOURCE_EXHAUSTED}, {@code INVALID_ARGUMENT},
 * {@code OUT_OF_RANGE}) and a message.
 */
public interface PipelineControl
{
    /**
     * The three P4Runtime update types.
     */
    enum UpdateType
    {
        INSERT, MODIFY, DELETE
    }

    /**
     * One exact-match key field: the P4Info match field name (for example {@code hdr.sml.job_id}) and its value,
     * big-endian, at most the field's bit width (P4Runtime's canonical byte string).
     */
    record ExactMatch(String field, byte[] value)
    {
    }

    /**
     * One action parameter: the P4Info parameter name and its big-endian value.
     */
    record ActionParam(String name, byte[] value)
    {
    }

    /**
     * A table entry: fully qualified table and action names as in the P4Info ({@code SwitchMLIngress.job_table}).
     * For DELETE only the table and match are significant.
     */
    record TableEntry(String table, List<ExactMatch> match, String action, List<ActionParam> params)
    {
    }

    /**
     * One copy of a multicast group: the egress port and the replication id (instance) the egress pipeline sees.
     */
    record Replica(int egressPort, int instance)
    {
    }

    /**
     * Insert, modify or delete a table entry.
     *
     * @param type  the update type.
     * @param entry the entry.
     * @throws PipelineException as the switch would refuse it.
     */
    void writeTableEntry(UpdateType type, TableEntry entry) throws PipelineException;

    /**
     * Write one cell of a register array (P4Runtime {@code RegisterEntry}, MODIFY).
     *
     * @param register the fully qualified register name.
     * @param index    the cell.
     * @param value    the new value, big-endian.
     * @throws PipelineException when the register or index does not exist.
     */
    void writeRegister(String register, int index, byte[] value) throws PipelineException;

    /**
     * Read one cell of a register array.
     *
     * @param register the fully qualified register name.
     * @param index    the cell.
     * @return the value, big-endian, the register's width.
     * @throws PipelineException when the register or index does not exist.
     */
    byte[] readRegister(String register, int index) throws PipelineException;

    /**
     * Insert, modify or delete a multicast group of the packet replication engine
     * (P4Runtime {@code PacketReplicationEngineEntry.multicast_group_entry}).
     *
     * @param type     the update type.
     * @param groupId  the group.
     * @param replicas its copies; ignored for DELETE.
     * @throws PipelineException as the switch would refuse it.
     */
    void writeMulticastGroup(UpdateType type, int groupId, List<Replica> replicas) throws PipelineException;

    /**
     * Replace the members of a parser value set (P4Runtime {@code ValueSetEntry}, which is written with MODIFY only).
     *
     * @param valueSet the fully qualified value set name ({@code SwitchMLIngressParser.sml_ports}).
     * @param members  each member's value of the set's one exact field, big-endian.
     * @throws PipelineException NOT_FOUND for another name, RESOURCE_EXHAUSTED beyond its size, INVALID_ARGUMENT for
     *                           a value wider than the field.
     */
    void writeValueSet(String valueSet, List<byte[]> members) throws PipelineException;

    /**
     * Every entry of a table (P4Runtime {@code Read} of a {@code TableEntry} naming only the table): what a controller
     * that restarted finds there, whoever wrote it.
     *
     * @param table the fully qualified table name.
     * @return its entries, in no particular order, each with its action and parameters.
     * @throws PipelineException NOT_FOUND for a table the program lacks, or as the switch refused the read.
     */
    List<TableEntry> readTableEntries(String table) throws PipelineException;

    /**
     * The ids of every multicast group of the packet replication engine (P4Runtime {@code Read} of a
     * {@code MulticastGroupEntry} with id 0, the wildcard).
     *
     * @return the group ids, ascending.
     * @throws PipelineException as the switch refused the read.
     */
    List<Integer> readMulticastGroups() throws PipelineException;
}

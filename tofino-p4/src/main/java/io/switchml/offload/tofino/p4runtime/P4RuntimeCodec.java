package io.switchml.offload.tofino.p4runtime;

import com.google.protobuf.ByteString;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import p4.config.v1.P4InfoOuterClass;
import p4.v1.P4DataOuterClass.P4Data;
import p4.v1.P4DataOuterClass.P4StructLike;
import p4.v1.P4RuntimeOuterClass.Action;
import p4.v1.P4RuntimeOuterClass.Entity;
import p4.v1.P4RuntimeOuterClass.FieldMatch;
import p4.v1.P4RuntimeOuterClass.Index;
import p4.v1.P4RuntimeOuterClass.MulticastGroupEntry;
import p4.v1.P4RuntimeOuterClass.PacketReplicationEngineEntry;
import p4.v1.P4RuntimeOuterClass.RegisterEntry;
import p4.v1.P4RuntimeOuterClass.Replica;
import p4.v1.P4RuntimeOuterClass.TableAction;
import p4.v1.P4RuntimeOuterClass.TableEntry;
import p4.v1.P4RuntimeOuterClass.Update;
import p4.v1.P4RuntimeOuterClass.ValueSetEntry;
import p4.v1.P4RuntimeOuterClass.ValueSetMember;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * {@link PipelineControl} calls as P4Runtime entities and back, through a {@link P4InfoIndex}: names to ids, values
 * to canonical byte strings (big-endian, leading zero bytes stripped, at least one byte: P4Runtime spec 8.4).
 * A pair register's cell (hi:lo, 8 bytes in PipelineControl) travels as a P4Data struct {lo, hi}.
 */
final class P4RuntimeCodec
{
    private final P4InfoIndex index;

    P4RuntimeCodec(final P4InfoIndex index)
    {
        this.index = index;
    }

    static ByteString canonical(final byte[] value)
    {
        int from = 0;
        while (from < value.length - 1 && value[from] == 0)
        {
            from++;
        }
        return ByteString.copyFrom(value, from, value.length - from);
    }

    static Update.Type type(final PipelineControl.UpdateType type)
    {
        return switch (type)
        {
            case INSERT -> Update.Type.INSERT;
            case MODIFY -> Update.Type.MODIFY;
            case DELETE -> Update.Type.DELETE;
        };
    }

    static PipelineControl.UpdateType type(final Update.Type type) throws PipelineException
    {
        return switch (type)
        {
            case INSERT -> PipelineControl.UpdateType.INSERT;
            case MODIFY -> PipelineControl.UpdateType.MODIFY;
            case DELETE -> PipelineControl.UpdateType.DELETE;
            default -> throw new PipelineException("INVALID_ARGUMENT", "update type " + type + " is not INSERT, MODIFY or DELETE");
        };
    }

    Update tableUpdate(final PipelineControl.UpdateType type, final PipelineControl.TableEntry entry) throws PipelineException
    {
        final P4InfoOuterClass.Table table = index.table(entry.table());
        final TableEntry.Builder builder = TableEntry.newBuilder().setTableId(table.getPreamble().getId());
        for (final PipelineControl.ExactMatch match : entry.match())
        {
            builder.addMatch(FieldMatch.newBuilder().setFieldId(P4InfoIndex.matchField(table, match.field()).getId())
                .setExact(FieldMatch.Exact.newBuilder().setValue(canonical(match.value()))));
        }
        if (type != PipelineControl.UpdateType.DELETE)
        {
            final P4InfoOuterClass.Action action = index.action(entry.action());
            final Action.Builder call = Action.newBuilder().setActionId(action.getPreamble().getId());
            for (final PipelineControl.ActionParam param : entry.params())
            {
                call.addParams(Action.Param.newBuilder().setParamId(P4InfoIndex.param(action, param.name()).getId())
                    .setValue(canonical(param.value())));
            }
            builder.setAction(TableAction.newBuilder().setAction(call));
        }
        return Update.newBuilder().setType(type(type)).setEntity(Entity.newBuilder().setTableEntry(builder)).build();
    }

    Update registerUpdate(final String register, final int cell, final byte[] value) throws PipelineException
    {
        final P4InfoOuterClass.Register declared = index.register(register);
        final P4Data data;
        if (declared.getTypeSpec().hasStruct())
        {
            final byte[] v = Arrays.copyOf(value, 8);
            data = P4Data.newBuilder().setStruct(P4StructLike.newBuilder()
                .addMembers(P4Data.newBuilder().setBitstring(canonical(Arrays.copyOfRange(v, 4, 8))))
                .addMembers(P4Data.newBuilder().setBitstring(canonical(Arrays.copyOfRange(v, 0, 4))))).build();
        }
        else
        {
            data = P4Data.newBuilder().setBitstring(canonical(value)).build();
        }
        return Update.newBuilder().setType(Update.Type.MODIFY).setEntity(Entity.newBuilder().setRegisterEntry(RegisterEntry.newBuilder()
            .setRegisterId(declared.getPreamble().getId()).setIndex(Index.newBuilder().setIndex(cell)).setData(data))).build();
    }

    Entity registerRead(final String register, final int cell) throws PipelineException
    {
        return Entity.newBuilder().setRegisterEntry(RegisterEntry.newBuilder().setRegisterId(index.register(register).getPreamble().getId())
            .setIndex(Index.newBuilder().setIndex(cell))).build();
    }

    Update valueSetUpdate(final String valueSet, final List<byte[]> members) throws PipelineException
    {
        final P4InfoOuterClass.ValueSet declared = index.valueSet(valueSet);
        if (declared.getMatchCount() != 1)
        {
            throw new PipelineException("INVALID_ARGUMENT", valueSet + " has " + declared.getMatchCount() + " fields, not one");
        }
        final ValueSetEntry.Builder entry = ValueSetEntry.newBuilder().setValueSetId(declared.getPreamble().getId());
        for (final byte[] member : members)
        {
            entry.addMembers(ValueSetMember.newBuilder().addMatch(FieldMatch.newBuilder().setFieldId(declared.getMatch(0).getId())
                .setExact(FieldMatch.Exact.newBuilder().setValue(canonical(member)))));
        }
        return Update.newBuilder().setType(Update.Type.MODIFY).setEntity(Entity.newBuilder().setValueSetEntry(entry)).build();
    }

    static Update multicastUpdate(final PipelineControl.UpdateType type, final int group, final List<PipelineControl.Replica> replicas)
    {
        final MulticastGroupEntry.Builder entry = MulticastGroupEntry.newBuilder().setMulticastGroupId(group);
        for (final PipelineControl.Replica replica : replicas)
        {
            entry.addReplicas(Replica.newBuilder().setEgressPort(replica.egressPort()).setInstance(replica.instance()));
        }
        return Update.newBuilder().setType(type(type)).setEntity(Entity.newBuilder().setPacketReplicationEngineEntry(
            PacketReplicationEngineEntry.newBuilder().setMulticastGroupEntry(entry))).build();
    }

    /**
     * A P4Runtime table entry by names (the server decoding a write, the client decoding a read).
     *
     * @param needsAction whether an entry without an action is refused (every update but DELETE).
     */
    PipelineControl.TableEntry tableEntry(final TableEntry entry, final boolean needsAction) throws PipelineException
    {
        final P4InfoOuterClass.Table table = index.table(entry.getTableId());
        final List<PipelineControl.ExactMatch> match = new ArrayList<>();
        for (final FieldMatch field : entry.getMatchList())
        {
            if (!field.hasExact())
            {
                throw new PipelineException("INVALID_ARGUMENT", table.getPreamble().getName() + " matches exactly only");
            }
            final P4InfoOuterClass.MatchField declared = P4InfoIndex.matchField(table, field.getFieldId());
            match.add(new PipelineControl.ExactMatch(declared.getName(), checked(field.getExact().getValue(),
                declared.getBitwidth(), declared.getName())));
        }
        String actionName = null;
        final List<PipelineControl.ActionParam> params = new ArrayList<>();
        if (entry.hasAction())
        {
            final P4InfoOuterClass.Action action = index.action(entry.getAction().getAction().getActionId());
            actionName = index.canonical(action.getPreamble().getName());
            for (final Action.Param param : entry.getAction().getAction().getParamsList())
            {
                final P4InfoOuterClass.Action.Param declared = P4InfoIndex.param(action, param.getParamId());
                params.add(new PipelineControl.ActionParam(declared.getName(), checked(param.getValue(), declared.getBitwidth(),
                    declared.getName())));
            }
        }
        else if (needsAction)
        {
            throw new PipelineException("INVALID_ARGUMENT", table.getPreamble().getName() + ": an entry needs an action");
        }
        return new PipelineControl.TableEntry(index.canonical(table.getPreamble().getName()), match, actionName, params);
    }

    /**
     * A read of every entry of a table (the client side): a TableEntry naming only the table.
     */
    Entity tableRead(final String table) throws PipelineException
    {
        return Entity.newBuilder().setTableEntry(TableEntry.newBuilder().setTableId(index.table(table).getPreamble().getId())).build();
    }

    /**
     * A read of every multicast group (the client side): group id 0 is the wildcard.
     */
    static Entity multicastGroupsRead()
    {
        return Entity.newBuilder().setPacketReplicationEngineEntry(PacketReplicationEngineEntry.newBuilder()
            .setMulticastGroupEntry(MulticastGroupEntry.newBuilder().setMulticastGroupId(0))).build();
    }

    /**
     * Read a wildcard table or multicast-group entity from a pipeline (the server side): the entities that match.
     */
    List<Entity> read(final Entity request, final PipelineControl pipeline) throws PipelineException
    {
        final List<Entity> out = new ArrayList<>();
        if (request.hasTableEntry() && request.getTableEntry().getMatchCount() == 0)
        {
            final List<String> tables = new ArrayList<>();
            if (request.getTableEntry().getTableId() == 0)
            {
                tables.addAll(index.tables().keySet());
            }
            else
            {
                tables.add(index.canonical(index.table(request.getTableEntry().getTableId()).getPreamble().getName()));
            }
            for (final String table : tables)
            {
                for (final PipelineControl.TableEntry entry : pipeline.readTableEntries(table))
                {
                    out.add(tableUpdate(PipelineControl.UpdateType.INSERT, entry).getEntity());
                }
            }
            return out;
        }
        if (request.hasPacketReplicationEngineEntry() && request.getPacketReplicationEngineEntry().hasMulticastGroupEntry())
        {
            final int wanted = request.getPacketReplicationEngineEntry().getMulticastGroupEntry().getMulticastGroupId();
            for (final int group : pipeline.readMulticastGroups())
            {
                if (wanted == 0 || wanted == group)
                {
                    out.add(Entity.newBuilder().setPacketReplicationEngineEntry(PacketReplicationEngineEntry.newBuilder()
                        .setMulticastGroupEntry(MulticastGroupEntry.newBuilder().setMulticastGroupId(group))).build());
                }
            }
            return out;
        }
        throw new PipelineException("UNIMPLEMENTED", "this switch reads register cells by index, whole tables and multicast groups");
    }

    /**
     * Apply one update to a pipeline (the server side).
     */
    void apply(final Update update, final PipelineControl pipeline) throws PipelineException
    {
        final Entity entity = update.getEntity();
        final PipelineControl.UpdateType type = type(update.getType());
        switch (entity.getEntityCase())
        {
            case TABLE_ENTRY -> pipeline.writeTableEntry(type, tableEntry(entity.getTableEntry(),
                type != PipelineControl.UpdateType.DELETE));
            case REGISTER_ENTRY ->
            {
                if (type != PipelineControl.UpdateType.MODIFY)
                {
                    throw new PipelineException("INVALID_ARGUMENT", "register entries can only be modified");
                }
                final RegisterEntry entry = entity.getRegisterEntry();
                final P4InfoOuterClass.Register register = index.register(entry.getRegisterId());
                final byte[] value;
                if (entry.getData().hasStruct())
                {
                    final List<P4Data> members = entry.getData().getStruct().getMembersList();
                    if (members.size() != 2)
                    {
                        throw new PipelineException("INVALID_ARGUMENT", register.getPreamble().getName() + " cells are {lo, hi}");
                    }
                    value = new byte[8];
                    System.arraycopy(width(members.get(1).getBitstring(), 4), 0, value, 0, 4);
                    System.arraycopy(width(members.get(0).getBitstring(), 4), 0, value, 4, 4);
                }
                else
                {
                    value = width(entry.getData().getBitstring(), 4);
                }
                pipeline.writeRegister(index.canonical(register.getPreamble().getName()), (int)entry.getIndex().getIndex(), value);
            }
            case PACKET_REPLICATION_ENGINE_ENTRY ->
            {
                final MulticastGroupEntry group = entity.getPacketReplicationEngineEntry().getMulticastGroupEntry();
                final List<PipelineControl.Replica> replicas = new ArrayList<>();
                for (final Replica replica : group.getReplicasList())
                {
                    replicas.add(new PipelineControl.Replica(replica.getEgressPort(), replica.getInstance()));
                }
                pipeline.writeMulticastGroup(type, group.getMulticastGroupId(), replicas);
            }
            case VALUE_SET_ENTRY ->
            {
                if (type != PipelineControl.UpdateType.MODIFY)
                {
                    throw new PipelineException("INVALID_ARGUMENT", "value set entries can only be modified");
                }
                final ValueSetEntry entry = entity.getValueSetEntry();
                final P4InfoOuterClass.ValueSet valueSet = index.valueSet(entry.getValueSetId());
                final List<byte[]> members = new ArrayList<>();
                for (final ValueSetMember member : entry.getMembersList())
                {
                    final P4InfoOuterClass.MatchField field = valueSet.getMatch(0);
                    if (member.getMatchCount() != 1 || !member.getMatch(0).hasExact() || member.getMatch(0).getFieldId() != field.getId())
                    {
                        throw new PipelineException("INVALID_ARGUMENT", valueSet.getPreamble().getName() + " members are one exact " +
                            "match of field " + field.getId());
                    }
                    members.add(checked(member.getMatch(0).getExact().getValue(), field.getBitwidth(),
                        valueSet.getPreamble().getName() + " member"));
                }
                pipeline.writeValueSet(index.canonical(valueSet.getPreamble().getName()), members);
            }
            default -> throw new PipelineException("UNIMPLEMENTED", "entity " + entity.getEntityCase() + " is not supported by this pipeline");
        }
    }

    /**
     * Read one register cell from a pipeline as a P4Runtime entity (the server side).
     */
    Entity readRegister(final RegisterEntry request, final PipelineControl pipeline) throws PipelineException
    {
        final P4InfoOuterClass.Register register = index.register(request.getRegisterId());
        final byte[] value = pipeline.readRegister(index.canonical(register.getPreamble().getName()), (int)request.getIndex().getIndex());
        final P4Data data = value.length == 8 ? P4Data.newBuilder().setStruct(P4StructLike.newBuilder()
            .addMembers(P4Data.newBuilder().setBitstring(canonical(Arrays.copyOfRange(value, 4, 8))))
            .addMembers(P4Data.newBuilder().setBitstring(canonical(Arrays.copyOfRange(value, 0, 4))))).build() :
            P4Data.newBuilder().setBitstring(canonical(value)).build();
        return Entity.newBuilder().setRegisterEntry(request.toBuilder().setData(data)).build();
    }

    /**
     * A register cell read back (the client side), as PipelineControl returns it.
     */
    static byte[] registerValue(final RegisterEntry entry)
    {
        if (entry.getData().hasStruct())
        {
            final byte[] value = new byte[8];
            System.arraycopy(width(entry.getData().getStruct().getMembers(1).getBitstring(), 4), 0, value, 0, 4);
            System.arraycopy(width(entry.getData().getStruct().getMembers(0).getBitstring(), 4), 0, value, 4, 4);
            return value;
        }
        return width(entry.getData().getBitstring(), 4);
    }

    private static byte[] checked(final ByteString value, final int bitwidth, final String what) throws PipelineException
    {
        final byte[] bytes = value.toByteArray();
        if (bytes.length == 0 || new java.math.BigInteger(1, bytes).bitLength() > bitwidth)
        {
            throw new PipelineException("INVALID_ARGUMENT", what + ": value does not fit in " + bitwidth + " bits");
        }
        return bytes;
    }

    private static byte[] width(final ByteString value, final int bytes)
    {
        final byte[] raw = value.toByteArray();
        final byte[] out = new byte[bytes];
        for (int i = 0; i < Math.min(bytes, raw.length); i++)
        {
            out[bytes - 1 - i] = raw[raw.length - 1 - i];
        }
        return out;
    }
}

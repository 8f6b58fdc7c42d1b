package io.switchml.appliance.journal;

import io.switchml.journal.ChronicleSettings;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Where Chronicle's working directory goes ({@link ChronicleSettings#confine}): the journal's writer puts it in the
 * journal's directory; a reader follows it only when the writer made it, so that it never creates anything in a
 * directory it only reads. That no /tmp/target appears is checked on the installed appliance by
 * scripts/ci-package-check.sh, since Chronicle reads the property once per JVM, when it loads.
 */
class ChronicleSettingsTest
{
    @Test
    void theWriterConfinesChronicleToTheJournalAndAReaderOnlyFollowsIt(@TempDir final Path journal) throws Exception
    {
        final String property = ChronicleSettings.WORK_DIRECTORY_PROP;
        final String saved = System.getProperty(property);
        try
        {
            System.clearProperty(property);
            ChronicleSettings.confine(journal, false);
            assertNull(System.getProperty(property), "a reader creates nothing");

            final Path work = journal.toAbsolutePath().resolve(ChronicleSettings.WORK_DIRECTORY);
            Files.createDirectories(work.resolve("tmp"));
            ChronicleSettings.confine(journal, false);
            assertEquals(work.toString(), System.getProperty(property), "a reader follows the writer");

            System.clearProperty(property);
            final Path other = journal.resolve("other");
            final String otherWork = other.toAbsolutePath().resolve(ChronicleSettings.WORK_DIRECTORY).toString();
            ChronicleSettings.confine(other, true);
            assertEquals(otherWork, System.getProperty(property), "the writer sets it");
            ChronicleSettings.confine(journal, true);
            assertEquals(otherWork, System.getProperty(property), "the first call in a JVM wins");
        }
        finally
        {
            if (saved == null)
            {
                System.clearProperty(property);
            }
            else
            {
                System.setProperty(property, saved);
            }
        }
    }
}
